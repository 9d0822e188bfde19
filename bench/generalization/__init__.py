"""Issue 30's `generalization` section: the development set x sources through the shipped workflow.

devset.py names the fixed clips and sources; runner.py queues workflows/api/video_swap_builtin.json on
a real ComfyUI server and reads back what it delivered; metrics.py scores each run (the nodes' own
reports for yield, refusals, QA failures and identity switches; bench/quality/score.py's independent
dlib scorer for the mouth, off-face pastes and identity); occluders.py composites known-truth eye
occluders; report.py writes the strips and docs/measurements/generalization.md.

    python -m bench.generalization [--smoke] [--doc]
"""
from __future__ import annotations


def run(smoke: bool = False, **kwargs) -> dict:
    """The section's result (see section.run for the optional arguments)."""
    from .section import run as _run

    return _run(smoke, **kwargs)


def write_doc(result: dict) -> str:
    """docs/measurements/generalization.md from a full (not smoke) result; returns the path written."""
    from .report import DOC, write

    if result.get("smoke"):
        raise ValueError("a smoke result is not a measurement: run without --smoke to write the doc")
    write(result)
    return str(DOC.relative_to(DOC.parents[2]))
