"""Resident memory a process keeps after Swapline nodes handle 4K frames (issue 18, item 6).

Runs Save Video (Swapline) on a synthetic 3840x2160 clip three times, the way ComfyUI calls a
node (the pack's installed execute, which returns freed memory), or with --raw the node's bare
execute, and prints RSS after each job. Usage (from the repo root):
    .venv/bin/python bench/memory_after_large_frames.py [--raw] [--frames 24]
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", action="store_true", help="call the node's own execute (no memory release)")
    ap.add_argument("--frames", type=int, default=24)
    args = ap.parse_args()
    from devtools.inprocess import import_pack
    from devtools.test_media import make_video

    import_pack()
    import folder_paths

    work = Path(tempfile.mkdtemp(prefix="swapline-mem-"))
    folder_paths.set_output_directory(str(work / "out"))
    nodes = importlib.import_module("swapline.nodes")
    classes = {c.__name__: c for c in asyncio.run(nodes.SwaplineExtension().get_node_list())}
    save = classes["SaveVideo"]
    run = save.execute.__func__.__wrapped__ if args.raw else save.execute.__func__
    from swapline_core.video.frames import FrameSequence

    clip = make_video(work / "4k.mp4", n=args.frames, w=3840, h=2160, rate=24)
    base = rss_mb()
    print(f"mode={'raw' if args.raw else 'installed'} frames={args.frames} base_rss_mb={base:.0f}")
    for job in range(3):
        seq = FrameSequence.open(str(clip), chunk=16)
        run(save, frames=seq, filename_prefix="mem/4k", crf=28, preset="ultrafast", audio=False)
        del seq
        gc.collect()
        print(f"job {job + 1}: rss_mb={rss_mb():.0f} (+{rss_mb() - base:.0f} over base)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
