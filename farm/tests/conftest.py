"""Farm tests: the repository root (swapline_core, devtools) and farm/ (swapline_farm) on sys.path.

farm-exec's fixtures: a real local Ray and real ComfyUI workers (CPU), shared by the session. Ray is
imported unguarded: without it these tests fail at collection instead of skipping.
"""
from __future__ import annotations

import sys
from pathlib import Path

FARM = Path(__file__).resolve().parent.parent
REPO = FARM.parent
for p in (str(FARM), str(REPO)):
    if p not in sys.path:
        sys.path.insert(0, p)

import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402

import pytest  # noqa: E402
import ray  # noqa: E402
from farm_helpers import ARTIFACTS, COMFY, passthrough_workflow  # noqa: E402


@pytest.fixture(scope="session")
def ray_cluster():
    # Ray's worker processes import swapline_farm and swapline_core from this checkout.
    os.environ["PYTHONPATH"] = os.pathsep.join([str(FARM), str(REPO), os.environ.get("PYTHONPATH", "")])
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="session")
def workers(ray_cluster, tmp_path_factory):
    """Two ComfyUI workers (Ray actors), each with its own ComfyUI process."""
    from swapline_farm.worker import ComfyWorker

    base = tmp_path_factory.mktemp("farm-workers")
    models = base / "models"
    models.mkdir()
    handles = [ComfyWorker.options(num_cpus=1, max_restarts=3, max_task_retries=0).remote(
        str(COMFY), 0, [], str(base / f"w{i}"), str(REPO), str(models), f"w{i}") for i in range(2)]
    ray.get([h.health.remote() for h in handles])
    yield handles
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for i, h in enumerate(handles):
        try:
            ray.get(h.stop.remote(), timeout=30)
        except Exception:
            pass
        log = base / f"w{i}" / "comfyui.log"
        if log.exists():
            shutil.copy(log, ARTIFACTS / f"worker-w{i}.log")


@pytest.fixture
def passthrough(tmp_path) -> Path:
    path = tmp_path / "passthrough.json"
    path.write_text(json.dumps(passthrough_workflow()))
    return path


@pytest.fixture
def farm(tmp_path, workers):
    """A coordinator factory over the session's workers, with its own store and ledgers."""
    from swapline_farm.coordinator import Coordinator
    from swapline_farm.ledger import DeadLetterLedger, JobLedger
    from swapline_farm.store import ChunkStore

    def make(**kw) -> Coordinator:
        # pass-through jobs have no face to check: whole-clip QA off unless a test turns it on
        opts = dict(work_dir=str(tmp_path / "farm"), chunk_frames=4, preroll=2, backoff_base_s=0.2,
                    backoff_max_s=1.0, health_interval_s=2.0, qa={"enabled": False})
        opts.update(kw)
        pool = opts.pop("workers", workers)
        metrics = opts.pop("metrics", None)
        root = Path(opts["work_dir"])
        return Coordinator(ChunkStore(str(root / "chunks")), JobLedger(root / "jobs.jsonl"),
                           DeadLetterLedger(root / "dead_letters.jsonl"), metrics, workers=pool, **opts)

    return make

