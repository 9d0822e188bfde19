"""Shared fixtures: repo on sys.path, synthetic models, and a real ComfyUI server."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))          # swapline_core, devtools, bench


def pytest_addoption(parser):
    parser.addoption("--keep-artifacts", action="store_true", help="keep server dirs under out/test-artifacts")


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    d = REPO / "out" / "test-artifacts"
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory) -> Path:
    """Test models folder: synthetic stand-ins under the same names users' real files have."""
    from devtools.synthetic_masks import build_mask_models
    from devtools.synthetic_models import build_models
    from devtools.synthetic_safety import build_safety_models
    from devtools.synthetic_sd import build_sd_models
    from devtools.synthetic_swappers import build_swappers

    d = tmp_path_factory.mktemp("models")
    build_models(d)
    build_swappers(d)           # every swapper family under ReActor's/FaceFusion's folder names
    build_mask_models(d)        # XSeg occluder and BiSeNet parser (models/facemask)
    build_sd_models(d)          # SD1.5 checkpoint, VAE and ControlNet for the face refine workflow
    build_safety_models(d)      # content-safety classifier stand-in (models/swapline_safety)
    return d


@pytest.fixture(scope="session")
def comfy(tmp_path_factory, models_dir, artifacts_dir, request):
    from devtools.comfy_harness import ComfyServer

    server = ComfyServer(tmp_path_factory.mktemp("comfy-base"), models_dir).start()
    yield server
    server.stop()
    shutil.copy(server.log_path, artifacts_dir / "comfyui-session.log")


@pytest.fixture(scope="module")
def staged(comfy):
    """The session's server with the shipped workflows' input files in its input folder."""
    from devtools.media import stage_workflow_inputs

    stage_workflow_inputs(comfy.base_dir / "input")
    return comfy


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Attach the server log to any failing test that used the server."""
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" and rep.failed and "comfy" in item.fixturenames:
        server = item.funcargs.get("comfy")
        if server is not None:
            rep.sections.append(("ComfyUI log (tail)", server.log_tail(120)))
