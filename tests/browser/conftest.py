"""Fixtures for the editor tests: a dedicated ComfyUI server and the real frontend in Chromium.

The server is separate from the session ``comfy`` one so that its execution cache is fresh: a
prompt that is entirely cached only re-sends the output nodes' results, and the QA gate's chart
would then never reach the editor. It uses the same synthetic models folder.
"""
from __future__ import annotations

import os
import shutil

import pytest

from devtools.swapline_editor import (
    Browser,
    stage_inputs,
    unavailable_reason,
    write_editor_settings,
)


def _skip_or_fail(reason: str):
    if os.environ.get("SWAPLINE_REQUIRE_BROWSER") == "1":
        pytest.fail(f"SWAPLINE_REQUIRE_BROWSER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser_available():
    reason = unavailable_reason()
    if reason:
        _skip_or_fail(reason)


@pytest.fixture(scope="session")
def editor_server(browser_available, tmp_path_factory, models_dir, artifacts_dir):
    from devtools.comfy_harness import ComfyServer

    server = ComfyServer(tmp_path_factory.mktemp("comfy-editor"), models_dir)
    write_editor_settings(server)
    server.prepare_dirs()
    stage_inputs(server)
    server.start()
    yield server
    server.stop()
    shutil.copy(server.log_path, artifacts_dir / "comfyui-editor.log")


@pytest.fixture(scope="session")
def browser(browser_available):
    with Browser() as b:
        yield b


@pytest.fixture(scope="session")
def editor(browser, editor_server):
    ed = browser.new_editor(editor_server).open()
    yield ed
    ed.page.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On failure: the editor's console errors and the server log tail."""
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" and rep.failed:
        ed = item.funcargs.get("editor")
        if ed is not None:
            rep.sections.append(("editor console (last 40)", "\n".join(ed.console[-40:])))
            rep.sections.append(("ComfyUI log (tail)", ed.server.log_tail(80)))
