"""Every combo and socket input of every node is checked by the validate_inputs ComfyUI calls.

Called the way execution.validate_inputs calls it: the argument names come from
inspect.getfullargspec, only those inputs are passed, linked inputs arrive as None.
"""
from __future__ import annotations

import inspect

import pytest

from devtools.inprocess import import_pack, run_async


@pytest.fixture(scope="module")
def node_classes(tmp_path_factory):
    import_pack()
    import importlib

    import folder_paths
    from comfy_api.latest import io

    from devtools.synthetic_safety import build_safety_models

    # no safety classifier is bundled: without one, the loader's own file check answers before the
    # combo checks this test is about (other loaders find the stand-ins tests put in ComfyUI's models)
    models = tmp_path_factory.mktemp("models")
    build_safety_models(models)
    folder_paths.add_model_folder_path("swapline_safety", str(models / "swapline_safety"))

    ext = importlib.import_module("swapline.nodes").SwaplineExtension()
    classes = run_async(ext.get_node_list())
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


def run_like_core(cls, **inputs):
    from comfy_api.internal import make_locked_method_func

    return make_locked_method_func(cls, "execute", cls.PREPARE_CLASS_CLONE({}))(**inputs)


def test_tiny_source_image_error_names_size_found_and_needed(node_classes):
    import torch

    from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer

    _, classes = node_classes
    with pytest.raises(Exception) as exc:
        run_like_core(classes["SwaplineBuildFaceModel"], images=torch.full((1, 16, 16, 3), 0.5),
                      analyzer=BuiltinAnalyzer(), reduce="mean")
    msg = str(exc.value)
    assert "16x16 px" in msg and "20 px" in msg and "torch.cat" not in msg


def test_error_texts_carry_no_absolute_server_paths(node_classes, tmp_path):
    import folder_paths

    _, classes = node_classes
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"")
    folder_paths.folder_names_and_paths["insightface"][0].append(str(tmp_path))
    try:
        with pytest.raises(Exception) as exc:
            run_like_core(classes["SwaplineSwapperLoader"], swapper="broken.onnx", provider="CPU",
                          mask="ellipse", mask_erode=0.0, mask_blur=0.05)
    finally:
        folder_paths.folder_names_and_paths["insightface"][0].remove(str(tmp_path))
    msg = str(exc.value)
    assert "broken.onnx" in msg and "download it again" in msg
    assert str(tmp_path) not in msg and "[insightface folder]/broken.onnx" in msg
