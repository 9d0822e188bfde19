"""Every combo and socket input of every node is checked by the validate_inputs ComfyUI calls.

Called the way execution.validate_inputs calls it: the argument names come from
inspect.getfullargspec, only those inputs are passed, linked inputs arrive as None.
"""
from __future__ import annotations

import asyncio
import inspect

import pytest
from inprocess import import_pack


@pytest.fixture(scope="module")
def node_classes():
    import_pack()
    import importlib

    from comfy_api.latest import io

    ext = importlib.import_module("swapline.nodes").SwaplineExtension()
    classes = asyncio.run(ext.get_node_list())
    assert len(classes) > 10
    return io, {c.GET_SCHEMA().node_id: c for c in classes}


def call_like_core(cls, values: dict):
    """As execution.validate_inputs does: argument names from getfullargspec, then the method run
    on a locked clone of the class (where class attributes cannot be set)."""
    from comfy_api.internal import first_real_override, make_locked_method_func

    fn = first_real_override(cls, "validate_inputs")
    assert fn is not None, f"{cls.__name__} has no validate_inputs"
    spec = inspect.getfullargspec(fn)
    assert spec.varkw is None, "**kwargs would switch off core's range checks"
    locked = make_locked_method_func(cls, "validate_inputs", cls.PREPARE_CLASS_CLONE({}))
    return locked(**{k: v for k, v in values.items() if k in spec.args})


def defaults(io, cls) -> dict:
    out = {}
    for inp in cls.GET_SCHEMA().inputs:
        if isinstance(inp, io.Combo.Input):
            out[inp.id] = inp.default if inp.default is not None else (inp.options or [None])[0]
        elif isinstance(inp, io.WidgetInput):
            out[inp.id] = inp.default
        else:
            out[inp.id] = None  # linked
    return out


def test_every_combo_of_every_node_rejects_an_unknown_value(node_classes):
    io, classes = node_classes
    checked = 0
    for node_id, cls in classes.items():
        for inp in cls.GET_SCHEMA().inputs:
            if not isinstance(inp, io.Combo.Input) or not inp.options:
                continue
            values = defaults(io, cls)
            values[inp.id] = "Definitely-Not-An-Option"
            res = call_like_core(cls, values)
            assert isinstance(res, str), (node_id, inp.id, res)
            assert inp.id in res and "Definitely-Not-An-Option" in res, res
            checked += 1
    assert checked >= 10


def test_track_mode_typo_names_node_input_value_and_choices(node_classes):
    io, classes = node_classes
    cls = classes["SwaplineTrackFaces"]
    values = defaults(io, cls)
    assert call_like_core(cls, values) is True
    values["mode"] = "Identity"
    res = call_like_core(cls, values)
    assert "SwaplineTrackFaces" in res and "'mode'" in res and "'Identity'" in res
    assert "'identity', 'largest', 'all'" in res


def test_a_literal_where_a_socket_must_be_linked_is_rejected(node_classes):
    io, classes = node_classes
    cls = classes["SwaplineSwapFrames"]
    values = defaults(io, cls)
    values["frames"] = 42
    res = call_like_core(cls, values)
    assert "'frames'" in res and "SWAPLINE_FRAMES" in res and "42" in res


def test_file_combo_with_a_number_says_so_instead_of_a_python_error(node_classes):
    _, classes = node_classes
    res = call_like_core(classes["SwaplineLoadVideo"], {"video": 42, "start": 0})
    assert isinstance(res, str) and "'video'" in res and "42" in res and "join" not in res


def test_range_checks_stay_with_core(node_classes):
    """Widget numbers are not in the generated signature, so ComfyUI keeps checking min/max."""
    _, classes = node_classes
    from comfy_api.internal import first_real_override

    args = inspect.getfullargspec(first_real_override(classes["SwaplineSaveVideo"], "validate_inputs")).args
    assert "crf" not in args and "preset" in args
