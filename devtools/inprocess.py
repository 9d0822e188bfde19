"""ComfyUI imported into the test process (CPU), and the pack imported the way ComfyUI imports it.

For tests that must look inside a sampling run (what the UNet receives), which a server cannot
show. Server-level behaviour is tested in tests/integration against a real `main.py`.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from .comfy_harness import COMFY  # the tree chosen by $SWAPLINE_COMFYUI

ROOT = Path(__file__).resolve().parent.parent


def setup_comfy() -> None:
    if str(COMFY) not in sys.path:
        sys.path.append(str(COMFY))      # after the repo: our `nodes` package must win over ComfyUI's nodes.py
    if "comfy.model_management" not in sys.modules:
        from comfy.cli_args import args

        args.cpu = True                  # no GPU probing in the test process


def import_pack():
    """The pack as package ``swapline`` (its modules use relative imports)."""
    setup_comfy()
    if "swapline" not in sys.modules:
        spec = importlib.util.spec_from_file_location("swapline", ROOT / "__init__.py",
                                                      submodule_search_locations=[str(ROOT)])
        mod = importlib.util.module_from_spec(spec)
        sys.modules["swapline"] = mod
        spec.loader.exec_module(mod)
    return sys.modules["swapline"]


def run_async(coro):
    """Run a coroutine to completion from a test, even when an earlier test left an event loop
    running in this thread (Playwright's sync API does): asyncio.run would refuse there."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()
