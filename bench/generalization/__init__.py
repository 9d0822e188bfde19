"""Issue 30's `generalization` section: the development set x sources through the shipped workflow.

devset.py names the fixed clips and sources; runner.py queues workflows/api/video_swap_builtin.json on
a real ComfyUI server and reads back what it delivered; metrics.py scores each run (the nodes' own
reports for yield, refusals, QA failures and identity switches; bench/quality/score.py's independent
dlib scorer for the mouth, off-face pastes and identity); occluders.py composites known-truth eye
occluders; section.py declares the section (bench/section.py writes docs/measurements/generalization.md);
report.py renders its tables and strips.

    python -m bench.generalization [--smoke] [--doc] [--set KEY=JSON] [--publish-only]
"""
from __future__ import annotations
