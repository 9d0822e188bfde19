"""The MediaPipe model files shipped in models/mediapipe/: every one present, the file whose digest
mesh_models.FILES records, in every way the pack is installed (a checkout, the registry archive),
with its licence; and a missing or altered one refused with what to do.

These read the real shipped files: a missing or altered file FAILS here, it does not skip.
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pathspec
import pytest

from swapline_core.backends import mesh_models as mm

REPO = Path(__file__).resolve().parents[3]
SHIPPED = REPO / "models" / "mediapipe"
WHEEL_SHA256 = "05dc4a9e593655a79558d05d6227d31018c2537a4bd3362b51e230cf22aecfe3"


def test_the_default_folder_is_the_shipped_one():
    assert mm.DEFAULT_DIR == SHIPPED
    assert set(mm.RUNTIME) | set(mm.HANDS) | {mm.TRIANGLES} == set(mm.FILES)


@pytest.mark.parametrize("name", sorted(mm.FILES))
def test_shipped_file_is_the_recorded_one(name):
    """Hashed here from the bytes (not through mesh_models' per-process cache)."""
    path = SHIPPED / name
    assert path.is_file(), f"{path} is not shipped: {mm.describe_missing([name])}"
    data = path.read_bytes()
    assert len(data) == mm.FILES[name].size, f"{name}: {len(data)} bytes, FILES records {mm.FILES[name].size}"
    assert hashlib.sha256(data).hexdigest() == mm.FILES[name].sha256, f"{name}: sha256 differs from FILES"


def test_nothing_reports_the_shipped_files_missing():
    assert mm.missing_or_changed() == []
    mm.check(names=tuple(mm.FILES))
    mm.check_hands()


def test_licence_and_readme_ship_beside_the_files():
    licence = (SHIPPED / "LICENSE").read_text()
    assert licence.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in licence
    readme = (SHIPPED / "README.md").read_text()
    assert WHEEL_SHA256 in readme and "scripts/fetch_mesh_models.py" in readme
    for name, spec in mm.FILES.items():
        assert name in readme and spec.sha256 in readme, name
        assert spec.member is None or spec.member in readme, spec.member


def test_a_checkout_and_the_registry_archive_carry_them():
    """Not gitignored (a git clone has them), not in .comfyignore (as comfy-cli reads it for
    `comfy node pack`, in git's ignore syntax), and never converted to CRLF (the JSON would then
    fail its digest on a Windows checkout)."""
    rels = [f"models/mediapipe/{n}" for n in (*mm.FILES, "LICENSE", "README.md")]
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *rels], cwd=REPO, capture_output=True, text=True)
    assert ignored.returncode == 1 and not ignored.stdout, f"gitignored: {ignored.stdout}"
    lines = [ln.strip() for ln in (REPO / ".comfyignore").read_text().splitlines()]
    spec = pathspec.PathSpec.from_lines("gitignore", [ln for ln in lines if ln and not ln.startswith("#")])
    assert [r for r in rels if spec.match_file(r)] == [], "left out of the registry archive by .comfyignore"
    attrs = subprocess.run(["git", "check-attr", "text", "--", *rels], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    assert all(a.endswith(": text: unset") for a in attrs), attrs


def _copy(tmp_path: Path) -> Path:
    for name in mm.FILES:
        shutil.copy(SHIPPED / name, tmp_path / name)
    return tmp_path


def test_missing_file_names_file_folder_and_what_to_do(tmp_path):
    folder = _copy(tmp_path)
    (folder / mm.IRIS).unlink()
    assert mm.missing_or_changed(folder) == [mm.IRIS]
    with pytest.raises(mm.MeshModelsMissing) as err:
        mm.check(folder)
    msg = str(err.value)
    assert mm.IRIS in msg and str(folder) in msg and str(mm.DEFAULT_DIR) in msg
    assert "reinstall the pack" in msg and f"scripts/fetch_mesh_models.py --dest {folder}" in msg
    assert mm.FILES[mm.IRIS].member in msg        # the by-hand unzip names the wheel member


def test_altered_triangles_are_refused_with_what_to_do(tmp_path):
    folder = _copy(tmp_path)
    path = folder / mm.TRIANGLES
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))    # what a CRLF checkout would make
    with pytest.raises(mm.MeshModelsMissing) as err:
        mm.triangles(folder)
    msg = str(err.value)
    assert "sha256 differs" in msg and mm.TRIANGLES in msg and "reinstall the pack" in msg
    assert "unzip" not in msg        # the wheel has no such member: only the script writes it
    assert mm.triangles().shape == (852, 3)       # the shipped one still reads
