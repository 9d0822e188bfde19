"""An API prompt that leaves out an input a node's own check names gets a sentence, not a Python
signature error (issue 50, item 7).

ComfyUI passes validate_inputs only the inputs present in the prompt (execution.validate_inputs,
0.3.75), so a prompt without Load Video's 'video' used to be refused with "LoadVideo.validate_inputs()
missing 1 required positional argument: 'video'". Every node's check, the generated one ComfyUI
calls and the hand-written one behind it, must name the missing input and what to give instead.
"""
from __future__ import annotations

import pytest

from devtools.inprocess import import_pack, run_async

PYTHON_WORDS = ("positional argument", "missing 1 required", "TypeError", "NoneType", "<absent>")


@pytest.fixture(scope="module")
def node_classes():
    import_pack()
    import importlib

    from comfy_api.latest import io

    ext = importlib.import_module("swapline.nodes").SwaplineExtension()
    return io, {c.GET_SCHEMA().node_id: c for c in run_async(ext.get_node_list())}


def _own_checks(classes):
    """(node id, class, the hand-written check, its argument names) of every node that has one."""
    from comfy_api.internal import first_real_override

    out = []
    for node_id, cls in classes.items():
        fn = first_real_override(cls, "validate_inputs")
        own = getattr(fn, "_swapline_own", None)
        if own is not None:
            out.append((node_id, cls, own, list(fn._swapline_own_args)))
    return out


def _call_like_core(cls, values: dict):
    import inspect

    from comfy_api.internal import first_real_override, make_locked_method_func

    spec = inspect.getfullargspec(first_real_override(cls, "validate_inputs"))
    locked = make_locked_method_func(cls, "validate_inputs", cls.PREPARE_CLASS_CLONE({}))
    return locked(**{k: v for k, v in values.items() if k in spec.args})


def _present_values(io, cls) -> dict:
    """Schema defaults for every input (first option of a combo without one); sockets linked (None)."""
    out = {}
    for inp in cls.GET_SCHEMA().inputs:
        if isinstance(inp, io.Combo.Input):
            out[inp.id] = inp.default if inp.default is not None else (inp.options or ["x"])[0]
        elif isinstance(inp, io.WidgetInput):
            out[inp.id] = inp.default
        else:
            out[inp.id] = None
    return out


def _assert_sentence(res, node_id: str, name: str, cls) -> None:
    assert isinstance(res, str), (node_id, name, res)
    assert f"'{name}'" in res, (node_id, res)
    assert cls.GET_SCHEMA().display_name.split(" (")[0] in res, (node_id, res)
    assert not any(w in res for w in PYTHON_WORDS), (node_id, res)


def test_every_own_check_names_each_missing_input(node_classes):
    io, classes = node_classes
    checks = _own_checks(classes)
    assert len(checks) >= 7          # every loader with a file list, Load Video, Mask Options
    for node_id, cls, _own, args in checks:
        optional = {i.id for i in cls.GET_SCHEMA().inputs if i.optional}
        for name in args:
            if name in optional:        # left out, an optional input is simply not used
                continue
            values = _present_values(io, cls)
            values.pop(name)
            _assert_sentence(_call_like_core(cls, values), node_id, name, cls)


def test_hand_written_checks_take_a_missing_input_too(node_classes):
    """The hand-written check alone (a subclass, a direct call) never raises a signature error."""
    _, classes = node_classes
    for node_id, cls, own, args in _own_checks(classes):
        _assert_sentence(own(cls), node_id, args[0], cls)      # all left out: the first is named


def test_a_check_written_without_defaults_still_gets_a_sentence(node_classes):
    """The generated check ComfyUI calls covers a future node whose own check has no defaults."""
    io, _ = node_classes
    from swapline.nodes import validation

    class Probe(io.ComfyNode):
        @classmethod
        def define_schema(cls):
            return io.Schema(node_id="SwaplineProbe", display_name="Probe Node (Swapline)",
                             inputs=[io.Combo.Input("thing", options=["a", "b"])], outputs=[])

        @classmethod
        def validate_inputs(cls, thing):
            return thing == "a" or f"no {thing}"

        @classmethod
        def execute(cls, thing):
            return io.NodeOutput()

    validation.install(Probe)
    _assert_sentence(_call_like_core(Probe, {}), "SwaplineProbe", "thing", Probe)
    assert _call_like_core(Probe, {"thing": "b"}) == "no b"


def test_load_video_without_video_says_what_to_give(node_classes):
    _, classes = node_classes
    res = _call_like_core(classes["SwaplineLoadVideo"], {"start": 0})
    assert res.startswith("Load Video Frames needs its 'video' input")
    assert "input folder" in res


def test_a_linked_file_input_is_not_called_missing(node_classes):
    """A linked input reaches validation as None: it is there, only its value is not known yet."""
    io, classes = node_classes
    for node_id, cls, _own, args in _own_checks(classes):
        values = _present_values(io, cls)
        values[args[0]] = None
        res = _call_like_core(cls, values)
        assert not (isinstance(res, str) and "needs its" in res), (node_id, res)
