"""Where the benchmark reads inputs and writes results (everything under out/bench)."""
from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# SWAPLINE_BENCH_OUT: another root for a run that must not touch a real run's out/bench (the CI
# smoke check; bench/run.py wipes its work folder at start)
OUT = Path(os.environ.get("SWAPLINE_BENCH_OUT") or REPO / "out" / "bench").resolve()
MEDIA = OUT / "media"          # generated clips (cached between runs)
MODELS = OUT / "models"        # synthetic buffalo_l + inswapper stand-ins
WORK = OUT / "work"            # chunk stores, encoded outputs, server base dirs (wiped per run)
SAMPLES = REPO / "assets" / "samples"
SAMPLE_CLIP = SAMPLES / "kling_avatar_clip.mp4"
SOURCE_FACE = SAMPLES / "source_face.png"
TARGET_REFERENCE = SAMPLES / "target_reference.png"
QUALITY_MEDIA = REPO / "tests" / ".cache" / "media"   # real face clips fetched by scripts/setup.sh
WORKFLOW = REPO / "workflows" / "api" / "video_swap_builtin.json"

