#!/usr/bin/env python3
"""Fetch the real face clips the tests and sample builder use, into tests/.cache/media/.

The clips ship inside the MIT-licensed wheel ``comfyui-workflow-templates-media-video`` (PyPI),
the only registry package holding moving faces. ComfyUI pins an older version that lacks
them, so the wheel is downloaded (never installed) and only the needed members are extracted.

Setup-time helper, not part of the pack (which never starts subprocesses). Idempotent: files
already present with the expected size are kept and nothing is downloaded.

    python scripts/fetch_sample_media.py [--dest DIR]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIST = "comfyui-workflow-templates-media-video"
VERSION = "0.3.101"
MEMBERS = ("templates/api_kling_avatar2-1.webp", "templates/video_wan2_1_infinitetalk-1.webp")
DEFAULT_DEST = ROOT / "tests" / ".cache" / "media"


def _present(dest: Path) -> bool:
    return all((dest / Path(m).name).is_file() and (dest / Path(m).name).stat().st_size > 0
               for m in MEMBERS)


def fetch(dest: Path = DEFAULT_DEST, python: str = sys.executable) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    out = [dest / Path(m).name for m in MEMBERS]
    if _present(dest):
        return out
    with tempfile.TemporaryDirectory(prefix="swapline-media-") as tmp:
        subprocess.run([python, "-m", "pip", "download", "-q", "--no-deps",
                        f"{DIST}=={VERSION}", "-d", tmp], check=True)
        wheels = sorted(Path(tmp).glob("comfyui_workflow_templates_media_video-*.whl"))
        if not wheels:
            raise SystemExit(f"pip download produced no {DIST} wheel in {tmp}")
        with zipfile.ZipFile(wheels[0]) as z:
            names = set(z.namelist())
            for member in MEMBERS:
                # the media lives under the import package, so match on the path suffix
                hit = next((n for n in names if n.endswith(member)), None)
                if hit is None:
                    raise SystemExit(f"{member} not found in {wheels[0].name}")
                target = dest / Path(member).name
                part = target.with_suffix(target.suffix + ".part")
                with z.open(hit) as src, open(part, "wb") as dst:
                    while block := src.read(1 << 20):
                        dst.write(block)
                part.replace(target)   # atomic: an interrupted run never leaves half a file
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", type=Path, default=DEFAULT_DEST)
    args = ap.parse_args(argv)
    for p in fetch(args.dest):
        print(f"[fetch_sample_media] {p} ({p.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
