"""install.py as ComfyUI-Manager runs it after a git clone and `pip install -r requirements.txt`:
offline, it reports the shipped mesh models present (every sha256 checked), and names the file and
what to do when one is altered. Runs the real script in a child Python."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from swapline_core.backends import mesh_models as mm

REPO = Path(__file__).resolve().parents[2]
# a proxy that refuses every connection: the script must not need the network
OFFLINE = {"http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9", "PIP_NO_INDEX": "1"}


def run_install(pack: Path, models: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, SWAPLINE_MODELS_DIR=str(models), **OFFLINE)
    return subprocess.run([sys.executable, str(pack / "install.py")], env=env, capture_output=True, text=True,
                          timeout=120, cwd=models)


def test_reports_the_shipped_mesh_models_present(tmp_path):
    r = run_install(REPO, tmp_path)
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first == (f"[Swapline] built-in mesh models present, all {len(mm.FILES)} files checked (sha256) in "
                     f"{REPO / 'models' / 'mediapipe'}"), r.stdout
    assert "NEEDED" not in r.stdout and "mediapipe" not in "".join(r.stdout.splitlines()[1:])
    assert (tmp_path / "insightface" / "models").is_dir()


def test_names_an_altered_mesh_model_and_what_to_do(tmp_path):
    """A copy of the pack's install-time files with one model altered: still exit 0 (the install
    goes on), and the line says which file, where, and to reinstall or run the restore script."""
    pack = tmp_path / "swapline"
    shutil.copytree(REPO / "swapline_core", pack / "swapline_core", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "models" / "mediapipe", pack / "models" / "mediapipe")
    shutil.copy(REPO / "install.py", pack / "install.py")
    hand = pack / "models" / "mediapipe" / mm.HAND
    data = bytearray(hand.read_bytes())
    data[4096] ^= 0xFF
    hand.write_bytes(bytes(data))
    models = tmp_path / "models"
    models.mkdir()
    r = run_install(pack, models)
    assert r.returncode == 0, r.stderr
    line = r.stdout.splitlines()[0]
    assert line.startswith("[Swapline] NEEDED by the shipped built-in workflows"), r.stdout
    assert f"model file(s) {mm.HAND} are missing from (or differ in)" in line
    assert str(pack / "models" / "mediapipe") in line
    assert "reinstall the pack" in line and "python scripts/fetch_mesh_models.py" in line
