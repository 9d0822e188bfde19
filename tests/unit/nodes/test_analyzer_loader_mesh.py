"""Load Face Analyzer offers the built-in mesh pack beside the default MTCNN + dlib pack."""
from __future__ import annotations

import importlib

from devtools.inprocess import import_pack, run_async


def test_mesh_pack_is_an_option_and_loads():
    import_pack()
    # registers the pack's model folders, as ComfyUI's loading of the extension does
    run_async(importlib.import_module("swapline.nodes").SwaplineExtension().get_node_list())
    analysis = importlib.import_module("swapline.nodes.analysis")
    schema = analysis.AnalyzerLoader.define_schema()
    pack = next(i for i in schema.inputs if i.id == "pack")
    assert pack.options[:2] == [analysis.BUILTIN, analysis.BUILTIN_MESH]
    assert pack.default == analysis.BUILTIN                       # the default stays MTCNN + dlib
    assert "Apache-2.0" in pack.tooltip
    assert analysis.AnalyzerLoader.validate_inputs(pack=analysis.BUILTIN_MESH) is True
    analyzer = analysis.load_analyzer(analysis.BUILTIN_MESH)
    assert analyzer.name == "builtin_mesh" and analyzer.threshold == analysis.BLAZEFACE_THRESH
    assert analysis.load_analyzer(analysis.BUILTIN_MESH) is analyzer  # cached like the builtin
    assert analyzer.recognizer_name == analysis.load_analyzer(analysis.BUILTIN).recognizer_name


def test_commercial_only_refuses_the_dlib_pack_and_passes_the_mesh_pack():
    import pytest

    import_pack()
    run_async(importlib.import_module("swapline.nodes").SwaplineExtension().get_node_list())
    analysis = importlib.import_module("swapline.nodes.analysis")
    errors = importlib.import_module("swapline.swapline_core.errors")
    schema = analysis.AnalyzerLoader.define_schema()
    flag = next(i for i in schema.inputs if i.id == "commercial_only")
    assert flag.default is False and flag.optional
    with pytest.raises(errors.SwaplineError, match="commercial") as e:
        analysis.AnalyzerLoader.execute(analysis.BUILTIN, "auto", 640, 0.0, commercial_only=True)
    assert "shape_predictor" in str(e.value) or "68" in str(e.value), str(e.value)
    assert analysis.BUILTIN_MESH in str(e.value)                 # says what would do
    out = analysis.AnalyzerLoader.execute(analysis.BUILTIN_MESH, "auto", 640, 0.0, commercial_only=True)
    assert out.result[0].name == "builtin_mesh"
