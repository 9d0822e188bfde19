"""Is the QA gate's expression reading stable under pipeline changes far from the mouth?

    OMP_NUM_THREADS=2 .venv/bin/python -m calibration.qa_expression_stability [--frames 48]

Builds the known-good swap (``improved_swap``) and the known-bad ``mouth_frozen_to_source`` of
``calibration/qa_cases.py`` from the sample clip, then changes each the way an unrelated pipeline change
would: the whole result slightly blurred (Gaussian sigma 1 px) or colour-shifted (CIELAB L +3,
a* -3, b* +6), the target's own forehead put back (a forehead blend change), the target's own eyes
and brows put back (an upper-face change). Every variant is judged by the gate; per variant it
reports the known-good case's worst window and the known-bad case's median window and caught share
(frames whose window is below the calibrated limit, of all frames and of the frames with a window
reading), and the limit ``calibration/calibrate_qa.py``'s rule (halfway between the two) would choose on
that variant. Two readings side by side: ``expression_corr`` (the gate's, mouth profiles, see
``swapline_core/qa/metrics_expression.py``) and the landmark one it replaced (correlation of the
fitted inner-lip openings, target vs result, recomputed here from the same records).
Writes ``docs/measurements/qa_expression_stability.md``.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.section import write_lines  # noqa: E402
from calibration import qa_cases  # noqa: E402 - run as a script: the repo goes on sys.path first
from swapline_core.qa import decide, gate  # noqa: E402
from swapline_core.qa.metrics_expression import MIN_TARGET_STD, MIN_WINDOW_FRAMES  # noqa: E402

VARIANTS = ("as built", "blur", "colour", "forehead", "eyes")


def _soft(shape, polys, grow: int, sigma: float) -> np.ndarray:
    m = np.zeros(shape[:2], np.float32)
    for p in polys:
        cv2.fillConvexPoly(m, cv2.convexHull(np.round(p).astype(np.int32)), 1.0)
    if grow:
        m = cv2.dilate(m, np.ones((grow, grow), np.uint8))
    return cv2.GaussianBlur(m, (0, 0), sigma)


def _blend(a: np.ndarray, b: np.ndarray, m: np.ndarray) -> np.ndarray:
    m = m[..., None]
    return np.clip(a.astype(np.float32) * (1 - m) + b.astype(np.float32) * m + 0.5, 0, 255).astype(np.uint8)


def perturb(kind: str, frames: list[np.ndarray], clip: qa_cases.Clip) -> list[np.ndarray]:
    out = []
    for k, fr in enumerate(frames):
        o, lms = clip.originals[k], [f.landmarks for f in clip.faces[k]]
        y = fr
        if kind == "blur":
            y = cv2.GaussianBlur(fr, (0, 0), 1.0)
        elif kind == "colour":
            lab = cv2.cvtColor(fr.astype(np.float32) / 255, cv2.COLOR_RGB2LAB)
            lab[..., 0] += 3
            lab[..., 1] -= 3
            lab[..., 2] += 6
            y = np.clip(cv2.cvtColor(lab, cv2.COLOR_LAB2RGB) * 255 + 0.5, 0, 255).astype(np.uint8)
        elif kind == "forehead":
            for lm in lms:     # above the brows, up by 0.55 of the nose-bridge-to-chin distance
                up = (lm[8] - lm[27]) * 0.55
                y = _blend(y, o, _soft(o.shape, [np.concatenate([lm[17:27], lm[17:27] - up])], 0, 4))
        elif kind == "eyes":
            for lm in lms:
                polys = [lm[list(range(17, 22)) + list(range(36, 42))], lm[list(range(22, 27)) + list(range(42, 48))]]
                y = _blend(y, o, _soft(o.shape, polys, 9, 3))
        out.append(y)
    return out


def landmark_corr(records: list[dict], window: int) -> list[float | None]:
    """The replaced reading: correlation of the fitted openings (mouth_target vs mouth_result)."""
    faces = [f for r in records for f in r["faces"]]
    have = [f for f in faces if f.get("mouth_target") is not None and f.get("mouth_result") is not None]
    t = np.array([f["mouth_target"] for f in have])
    r = np.array([f["mouth_result"] for f in have])
    half = window // 2
    vals: dict[int, float | None] = {}
    for i, f in enumerate(have):
        lo, hi = max(0, i - half), min(len(have), i + half + 1)
        tw, rw = t[lo:hi], r[lo:hi]
        c = None
        if len(tw) >= MIN_WINDOW_FRAMES and tw.std() >= MIN_TARGET_STD:
            c = 0.0 if rw.std() < 1e-9 else float(np.corrcoef(tw, rw)[0, 1])
        vals[id(f)] = c
    return [vals.get(id(f)) for f in faces]


def summarize(good: list[float | None], bad: list[float | None], limit: float) -> dict:
    g = np.array([v for v in good if v is not None])
    b = np.array([v for v in bad if v is not None])
    g_worst, b_med = float(g.min()), float(np.median(b))
    return {"good_worst": g_worst, "good_measured": f"{len(g)}/{len(good)}", "bad_median": b_med,
            "bad_caught_all": float((b < limit).sum() / len(bad)),
            "bad_caught_measured": float((b < limit).mean()), "bad_measured": f"{len(b)}/{len(bad)}",
            "good_failing": int((g < limit).sum()), "rule_limit": (g_worst + b_med) / 2}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--frames", type=int, default=48)
    args = ap.parse_args(argv)
    from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer

    an = BuiltinAnalyzer()
    th = decide.QAThresholds()
    with tempfile.TemporaryDirectory() as store:
        clip = qa_cases.load_clip(an, store, count=args.frames)
    cases = qa_cases.build_cases(clip)
    rows = []
    for kind in VARIANTS:
        recs = {}
        for name in ("improved_swap", "mouth_frozen_to_source"):
            t0 = time.perf_counter()
            frames = cases[name] if kind == "as built" else perturb(kind, cases[name], clip)
            recs[name] = gate.evaluate_frames(an, clip.originals, frames, clip.faces, clip.source, th)["frames"]
            print(f"  {name} {kind}: {time.perf_counter() - t0:.0f} s", flush=True)
        new = [[f.get("expression_corr") for r in recs[n] for f in r["faces"]]
               for n in ("improved_swap", "mouth_frozen_to_source")]
        old = [landmark_corr(recs[n], th.expression_window) for n in ("improved_swap", "mouth_frozen_to_source")]
        rows.append({"variant": kind, "new": summarize(*new, th.min_expression_corr),
                     "old": summarize(*old, OLD_LIMIT)})
        print(rows[-1], flush=True)
    write(rows, args.frames, th)
    return 0


# The landmark reading's limit in thresholds.json before it was replaced (calibrated 2026-12-01 02:30).
OLD_LIMIT = 0.264


def write(rows: list[dict], frames: int, th: decide.QAThresholds) -> None:
    lines = [
        (f"Sample clip, first {frames} frames; known-good `improved_swap` and known-bad `mouth_frozen_to_source` "
         "(`calibration/qa_cases.py`), each as built and changed as a pipeline change far from the mouth would: "
         "blur (Gaussian sigma 1 px, whole result), colour (CIELAB L +3, a* -3, b* +6, whole result), forehead "
         "(the target's own forehead back), eyes (the target's own eyes and brows back). Per frame, the window "
         f"value ({th.expression_window} evaluated frames) is judged against the limit: `expression_corr` "
         f"(mouth profiles, today's gate) against the calibrated {th.min_expression_corr:g}; the landmark "
         f"reading it replaced (correlation of the fitted openings) against its last limit {OLD_LIMIT:g}. "
         "\"Rule limit\": what `calibration/calibrate_qa.py` would choose on that variant (halfway between the "
         "known-good worst window and the known-bad median). Caught: frames whose window fails, of all frames "
         "and of the frames with a window reading (a frame has none when the target's mouth does not move in "
         "its window or, for the landmark reading, when the result is not re-detected)."), "",
        "| reading | variant | known-good worst | known-good failing | known-bad median | caught (all frames) "
        "| caught (measured) | rule limit |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for key, label in (("new", "expression_corr (mouth profiles)"), ("old", "landmark openings (replaced)")):
        for r in rows:
            s = r[key]
            lines.append(f"| {label} | {r['variant']} | {s['good_worst']:.3f} ({s['good_measured']}) | "
                         f"{s['good_failing']} | {s['bad_median']:.3f} | {s['bad_caught_all']:.2f} | "
                         f"{s['bad_caught_measured']:.2f} ({s['bad_measured']}) | {s['rule_limit']:.3f} |")
    for key in ("new", "old"):
        lims = [r[key]["rule_limit"] for r in rows]
        worst = [r[key]["good_worst"] for r in rows]
        lines += ["", f"- {'expression_corr' if key == 'new' else 'landmark openings'}: rule limit spread "
                  f"{max(lims) - min(lims):.3f} ({min(lims):.3f}-{max(lims):.3f}), known-good worst window spread "
                  f"{max(worst) - min(worst):.3f}."]
    write_lines("qa_expression_stability", "QA expression reading: stability under unrelated pipeline changes",
                "Measured by `calibration/qa_expression_stability.py` (module docstring).",
                f"python -m calibration.qa_expression_stability --frames {frames}", lines)


if __name__ == "__main__":
    raise SystemExit(main())
