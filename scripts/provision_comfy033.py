"""Provision the ComfyUI 0.33.0 source tree that scripts/test.sh runs its second pass on.

No package registry carries a ComfyUI 0.33 tree, so it comes from the first of:
  1. $SWAPLINE_SHARED/comfyui-0.33/comfyui-0.33.0-783545f6.tar.xz (checked by sha256),
  2. ../shared/comfyui-0.33/ beside the clone (how developers and CI have it),
  3. GitHub's archive of the same upstream commit, where the network allows.
When none works it says what it tried and how to fix it, and exits 1: CI must fail, not skip.
Only the tests need this; scripts/demo.sh runs on ComfyUI 0.3.75 alone.

Usage: python scripts/provision_comfy033.py DEST   (DEST: .comfy/ComfyUI-0.33)
"""
from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMMIT = "783545f689a0af730065994b46b382ae24844c99"
TARBALL = "comfyui-0.33.0-783545f6.tar.xz"
TARBALL_SHA256 = "8680124ff78fa9d0993194fba3e1436cfae5122b8c193e68e6828a918fc0cbe6"
ARCHIVE_URL = f"https://codeload.github.com/comfyanonymous/ComfyUI/tar.gz/{COMMIT}"
# user data and the custom_nodes link survive a re-provision; the code is replaced
KEEP = ("custom_nodes", "user", "models", "input", "output")
STAMP = ".swapline-comfyui-commit"


def shared_dirs() -> list[Path]:
    dirs = [Path(os.environ["SWAPLINE_SHARED"])] if os.environ.get("SWAPLINE_SHARED") else []
    return dirs + [REPO.parent / "shared"]


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download(url: str, dest: Path, timeout: float) -> None:
    with urllib.request.urlopen(url, timeout=timeout) as r, dest.open("wb") as f:  # noqa: S310 (fixed https URL)
        shutil.copyfileobj(r, f)


def install_tree(archive: Path, target: Path) -> None:
    """Unpack `archive` (one top-level folder holding ComfyUI) into `target`, keeping user data."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        with tarfile.open(archive) as t:
            # the "data" filter (no links out, no devices) exists from Python 3.11.4 on
            t.extractall(tmp, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
        tops = [p for p in Path(tmp).iterdir() if p.is_dir()]
        if len(tops) != 1 or '"0.33.0"' not in (tops[0] / "comfyui_version.py").read_text():
            raise RuntimeError(f"{archive} does not hold a ComfyUI 0.33.0 tree")
        src = tops[0]
        target.mkdir(exist_ok=True)
        for p in target.iterdir():
            if p.name not in KEEP:
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        for p in src.iterdir():
            if p.name in KEEP and (target / p.name).exists():
                continue
            shutil.move(str(p), target / p.name)
    (target / STAMP).write_text(COMMIT)


def provision(target: Path, url: str | None = None, timeout: float = 60.0) -> tuple[bool, list[str]]:
    """(done, what was tried). Done at once when `target` already holds this commit."""
    url = url or ARCHIVE_URL
    stamp = target / STAMP
    if stamp.is_file() and stamp.read_text() == COMMIT and (target / "main.py").is_file():
        return True, []
    tried = []
    for folder in shared_dirs():
        tar = folder / "comfyui-0.33" / TARBALL
        if not tar.is_file():
            tried.append(f"{tar}: not found")
            continue
        got = sha256(tar)
        if got != TARBALL_SHA256:
            tried.append(f"{tar}: sha256 {got}, expected {TARBALL_SHA256}")
            continue
        print(f"[setup] provisioning ComfyUI 0.33.0 into {target} from {tar}")
        install_tree(tar, target)
        return True, tried
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "comfyui.tar.gz"
        try:
            download(url, archive, timeout)
        except OSError as e:
            tried.append(f"{url}: {e}")
            return False, tried
        print(f"[setup] provisioning ComfyUI 0.33.0 into {target} from {url}")
        install_tree(archive, target)
    return True, tried


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    done, tried = provision(Path(argv[0]).resolve())
    if done:
        return 0
    print("[setup] ERROR: ComfyUI 0.33.0 (the tests' second version) could not be provisioned. Tried:", file=sys.stderr)
    for line in tried:
        print(f"[setup]   {line}", file=sys.stderr)
    print(f"[setup] Fix: lay {TARBALL} (sha256 {TARBALL_SHA256[:16]}...) in a folder comfyui-0.33/ and point\n"
          "[setup]   SWAPLINE_SHARED at the folder above it, or allow https://codeload.github.com, or run\n"
          "[setup]   the 0.3.75 tests only: SWAPLINE_TEST_COMFY=0.3.75 scripts/test.sh (CI never skips 0.33).\n"
          "[setup] scripts/demo.sh does not need ComfyUI 0.33.", file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
