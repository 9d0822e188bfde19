"""A malformed SWAPLINE_* setting stops the pack when ComfyUI loads it (issue 50): ComfyUI logs
the message and marks the pack failed, instead of every job running with a setting nobody asked for."""
from __future__ import annotations

import importlib

import pytest

from devtools.inprocess import import_pack, run_async


def test_the_extension_refuses_a_malformed_setting_at_load(monkeypatch):
    import_pack()
    from swapline.swapline_core.errors import SwaplineError

    ext = importlib.import_module("swapline.nodes").SwaplineExtension()
    monkeypatch.setenv("SWAPLINE_MODEL_CACHE_MB", "2GB")
    for load in (ext.on_load, ext.get_node_list):
        with pytest.raises(SwaplineError, match=r"SWAPLINE_MODEL_CACHE_MB='2GB' is not valid"):
            run_async(load())
