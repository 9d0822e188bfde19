"""Load Face Swapper offers the built-in mesh swap beside the classical one (not the default)."""
from __future__ import annotations

import importlib
import json

from devtools.inprocess import import_pack, run_async


def test_mesh_swapper_is_an_option_and_loads_commercial_only():
    import_pack()
    run_async(importlib.import_module("swapline.nodes").SwaplineExtension().get_node_list())
    swap = importlib.import_module("swapline.nodes.swap")
    schema = swap.SwapperLoader.define_schema()
    choice = next(i for i in schema.inputs if i.id == "swapper")
    assert choice.options[:2] == [swap.CLASSICAL, swap.MESH]
    assert choice.default == swap.CLASSICAL                      # the default stays the classical swap
    assert swap.SwapperLoader.validate_inputs(swapper=swap.MESH) is True
    sw = swap.load_swapper(swap.MESH, "auto", "ellipse", 0.0, 0.05, commercial_only=True)
    assert sw.name == "mesh_warp" and not sw.needs_landmarks
    assert swap.load_swapper(swap.MESH, "auto", "ellipse", 0.0, 0.05) is sw      # cached
    report = json.loads(swap.swapper_report(sw))
    assert report["family"] == "mesh" and {m["commercial"] for m in report["models"]} == {"yes"}
