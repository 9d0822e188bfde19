"""Install paths a user takes, each on a fresh ComfyUI copy, each followed by a real prompt."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from devtools.comfy_harness import COMFY, REPO, ComfyServer
from devtools.media import T1, insightface_image

# Each copies a ComfyUI and starts it fresh (1-2 min): what is installed is the same tree whatever
# the version, and the 0.33 pass loads the pack into 0.33 for every other test.
pytestmark = pytest.mark.once

BUILTIN = "builtin (MTCNN + dlib, no download)"
BUILTIN_MESH = "builtin mesh (BlazeFace + MediaPipe mesh, no download)"   # the shipped workflows' analyzer
BIN = Path(sys.executable).parent


def fresh_comfy(tmp: Path) -> Path:
    dest = tmp / "ComfyUI"
    shutil.copytree(COMFY, dest, symlinks=True, ignore=shutil.ignore_patterns("swapline", "__pycache__"))
    return dest


def clone_repo(dest: Path) -> Path:
    """What a user gets: the committed tree, not this working copy."""
    subprocess.run(["git", "clone", "-q", str(REPO), str(dest)], check=True)
    return dest


def detect_on_t1(comfy_dir: Path, pack: str = BUILTIN) -> int:
    server = ComfyServer(comfy_dir, comfy_dir / "models", comfy_dir=comfy_dir, link_pack=False)
    shutil.copy(insightface_image(T1), comfy_dir / "input" / T1)
    server.start()
    try:
        hist = server.run({
            "1": {"class_type": "LoadImage", "inputs": {"image": T1}},
            "2": {"class_type": "SwaplineAnalyzerLoader",
                  "inputs": {"pack": pack, "provider": "CPU", "det_size": 640, "det_thresh": 0.0}},
            "3": {"class_type": "SwaplineDetectFaces",
                  "inputs": {"images": ["1", 0], "analyzer": ["2", 0], "embeddings": False,
                             "landmarks": False, "no_face": "pass through"}},
            "4": {"class_type": "PreviewImage", "inputs": {"images": ["3", 1]}},
        })
        return len(hist["outputs"]["3"]["swapline_faces"][0]["frames"][0]["faces"])
    finally:
        server.stop()


@pytest.mark.slow
def test_comfy_cli_node_install_from_local_repo(tmp_path):
    comfy_dir = fresh_comfy(tmp_path)
    src = clone_repo(tmp_path / "swapline")
    env = dict(os.environ, HOME=str(tmp_path / "home"), DO_NOT_TRACK="1", PATH=f"{BIN}:{os.environ['PATH']}")
    r = subprocess.run([str(BIN / "comfy"), "--skip-prompt", "--no-enable-telemetry", "--workspace", str(comfy_dir),
                        "node", "install", f"file://localhost{src}"], env=env, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (comfy_dir / "custom_nodes" / "swapline" / "__init__.py").exists(), r.stdout
    assert (comfy_dir / "models" / "insightface" / "models").is_dir(), "install.py did not run"
    assert detect_on_t1(comfy_dir) == 6


@pytest.mark.slow
def test_manual_clone_requirements_and_install_py(tmp_path):
    comfy_dir = fresh_comfy(tmp_path)
    pack = clone_repo(comfy_dir / "custom_nodes" / "swapline")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-r", str(pack / "requirements.txt")],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    for _ in range(2):  # idempotent: a second run changes nothing and still succeeds
        r = subprocess.run([sys.executable, str(pack / "install.py")], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
    assert "model folders ready" in r.stdout
    # the built-in workflows' MediaPipe models come with the clone, checked offline by install.py
    shipped = pack.resolve() / "models" / "mediapipe"
    assert f"built-in mesh models present, all 6 files checked (sha256) in {shipped}" in r.stdout
    assert (comfy_dir / "models" / "facerestore_models").is_dir()
    assert detect_on_t1(comfy_dir, BUILTIN_MESH) == 6      # no scripts/setup.sh, nothing fetched


@pytest.mark.slow
def test_registry_archive_installs_and_runs(tmp_path):
    """What the Comfy Registry serves: `comfy node pack` of the committed tree, unzipped into
    custom_nodes. It must hold everything the pack needs (a prompt runs on the shipped mesh models)
    and no tooling."""
    sys.path.insert(0, str(REPO / "scripts"))
    import validate_pack

    archive = validate_pack.pack(clone_repo(tmp_path / "swapline"), tmp_path / "swapline.zip")
    assert validate_pack.archive_problems(archive) == []
    comfy_dir = fresh_comfy(tmp_path)
    with zipfile.ZipFile(archive) as z:
        z.extractall(comfy_dir / "custom_nodes" / "swapline")
    r = subprocess.run([sys.executable, str(comfy_dir / "custom_nodes" / "swapline" / "install.py")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "built-in mesh models present" in r.stdout, r.stdout
    assert detect_on_t1(comfy_dir, BUILTIN_MESH) == 6
