"""The QA report as a picture over frame index: identity/leakage, flicker ratio, and one line per
pixel/expression metric as its "load" (value relative to its limit: above 1 fails).

Drawn with OpenCV, which the pack already needs, rather than matplotlib (not a dependency and
heavy to import inside ComfyUI). Where a frame has several faces the worst one is plotted (lowest
identity, highest leakage and flicker), because that is the face that decides the frame.
"""
from __future__ import annotations

import math

import cv2
import numpy as np

W, H = 1000, 620
LEFT, RIGHT, TOP, GAP, BOTTOM = 64, 16, 52, 40, 40
FONT = cv2.FONT_HERSHEY_SIMPLEX
# RGB (the image is returned RGB, cv2 only sees numbers)
BG, INK, GRID = (255, 255, 255), (40, 40, 40), (225, 225, 225)
BLUE, ORANGE, GREEN, RED = (31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40)
FAIL_BAND = (250, 215, 215)
# one colour per load metric (decide.LOAD_METRICS order)
LOAD_COLORS = ((148, 103, 189), (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34),
               (23, 190, 207), (31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (90, 90, 160),
               (160, 110, 40))
LOAD_CAP = 3.0


def _worst(report: dict, metric: str, pick) -> list[float | None]:
    out = []
    for rec in report["frames"]:
        vals = [f[metric] for f in rec.get("faces", []) if f.get(metric) is not None]
        out.append(pick(vals) if vals else None)
    return out


def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    span = max(hi - lo, 1e-9)
    raw = span / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [round(first + i * step, 10) for i in range(int((hi - first) / step + 1e-9) + 1)]


def _text(img, s, org, scale=0.42, color=INK, thick=1):
    cv2.putText(img, s, (int(org[0]), int(org[1])), FONT, scale, color, thick, cv2.LINE_AA)


def _dashed(img, y, x0, x1, color, dash=8):
    for x in range(int(x0), int(x1), dash * 2):
        cv2.line(img, (x, y), (min(x + dash, int(x1)), y), color, 1, cv2.LINE_AA)


class _Panel:
    def __init__(self, img, top, bottom, n, lo, hi, ylabel):
        self.img, self.top, self.bottom, self.n = img, top, bottom, max(n, 1)
        self.lo, self.hi = lo, hi
        self.x0, self.x1 = LEFT, W - RIGHT
        for t in _nice_ticks(lo, hi):
            _text(img, f"{t:g}", (6, self.y(t) + 4), 0.38)
        _text(img, ylabel, (self.x0, top - 8), 0.45, INK, 1)
        self.frame()

    def frame(self):
        """Grid and border; drawn again after the failure bands, which would hide them."""
        for t in _nice_ticks(self.lo, self.hi):
            cv2.line(self.img, (self.x0 + 1, self.y(t)), (self.x1 - 1, self.y(t)), GRID, 1)
        cv2.rectangle(self.img, (self.x0, self.top), (self.x1, self.bottom), INK, 1)

    def x(self, i: float) -> int:
        return round(self.x0 + (i + 0.5) * (self.x1 - self.x0) / self.n)

    def y(self, v: float) -> int:
        f = (v - self.lo) / max(self.hi - self.lo, 1e-9)
        return round(self.bottom - float(np.clip(f, 0, 1)) * (self.bottom - self.top))

    def band(self, i: int, color):
        half = max(1, math.ceil((self.x1 - self.x0) / (2 * self.n)))
        cv2.rectangle(self.img, (self.x(i) - half, self.top + 1), (self.x(i) + half, self.bottom - 1), color, -1)

    def series(self, values, color, failing):
        run: list[tuple[int, int]] = []
        for i, v in enumerate(values + [None]):
            if v is None:  # a gap (no face / skipped) breaks the line instead of bridging it
                if len(run) > 1:
                    cv2.polylines(self.img, [np.array(run, np.int32)], False, color, 2, cv2.LINE_AA)
                run = []
                continue
            run.append((self.x(i), self.y(v)))
        for i, v in enumerate(values):
            if v is not None:
                cv2.circle(self.img, (self.x(i), self.y(v)), 4 if i in failing else 2,
                           RED if i in failing else color, -1, cv2.LINE_AA)

    def threshold(self, v, color):
        _dashed(self.img, self.y(v), self.x0, self.x1, color)

    def legend(self, items):
        # Above the panel, right-aligned: inside it would cover data points.
        x = self.x1 - sum(40 + 7 * len(s) for s, _, _ in items)
        y = self.top - 8
        for label, color, dashed in items:
            if dashed:
                _dashed(self.img, y - 4, x, x + 24, color, 4)
            else:
                cv2.line(self.img, (x, y - 4), (x + 24, y - 4), color, 2, cv2.LINE_AA)
            _text(self.img, label, (x + 28, y), 0.38)
            x += 40 + 7 * len(label)


def _range(values, extra, lo_pad, hi_pad, floor=None, ceil=None):
    vals = [v for v in values if v is not None] + list(extra)
    lo, hi = min(vals) - lo_pad, max(vals) + hi_pad
    if floor is not None:
        lo = max(lo, floor)
    if ceil is not None:
        hi = min(hi, ceil)
    return lo, hi


def plot_report(report: dict) -> np.ndarray:
    """RGB uint8 image (620 x 1000) of a report from :func:`swapline_core.qa.run_qa`."""
    from .decide import LOAD_METRICS, compact_frames, shown
    img = np.full((H, W, 3), BG, np.uint8)
    th = {k: v for k, v in shown(report.get("thresholds", {})).items() if v is not None}
    frames = report["frames"]
    n = len(frames)
    failing = {i for i, r in enumerate(frames) if r["status"] == "fail"}
    ident = _worst(report, "identity", min)
    leak = _worst(report, "leakage", max)
    flick = _worst(report, "flicker_ratio", max)

    s = report.get("summary", {})
    title = (f"QA {report.get('decision', '?').upper()}: {s.get('ok', 0)} ok, {s.get('fail', 0)} failing, "
             f"{s.get('no_face', 0)} without face, {s.get('skipped', 0)} skipped of {n} frames")
    if s.get("decision_reasons"):
        title += " - " + "; ".join(s["decision_reasons"])[:60]
    _text(img, title, (LEFT, 22), 0.55, RED if report.get("decision") == "fail" else GREEN, 1)

    plot_h = (H - TOP - 2 * GAP - BOTTOM) // 3
    top1, top2, top3 = TOP, TOP + plot_h + GAP, TOP + 2 * (plot_h + GAP)
    lims = [th[k] for k in ("min_identity", "max_leakage") if k in th]
    lo, hi = _range(ident + leak, lims or [0.0, 1.0], 0.03, 0.06, -1.0, 1.0)
    p1 = _Panel(img, top1, top1 + plot_h, n, lo, hi, "similarity")
    p2_hi = _range(flick, [th.get("max_flicker_ratio", 1.0), 1.0], 0, 0.5)[1]
    p2 = _Panel(img, top2, top2 + plot_h, n, 0.0, p2_hi, "flicker ratio")
    p3 = _Panel(img, top3, top3 + plot_h, n, 0.0, LOAD_CAP, "metric / its limit (above 1 fails)")
    for i in failing:
        for p in (p1, p2, p3):
            p.band(i, FAIL_BAND)
    for p in (p1, p2, p3):
        p.frame()
    p3.threshold(1.0, RED)
    compact = compact_frames(report)
    legend = []
    # content_safety: the optional classifier's score over its limit (no face metric, same scale)
    for metric, color in zip([m for m, _, _ in LOAD_METRICS] + ["content_safety"], LOAD_COLORS):
        vals = [None if c["loads"].get(metric) is None else min(c["loads"][metric], LOAD_CAP) for c in compact]
        if any(v is not None for v in vals):
            p3.series(vals, color, failing)
            legend.append((metric.replace("_", " "), color, False))
    # the legend of the lower panel goes below it: ten metrics do not fit above
    x, y = LEFT, p3.bottom + 30
    for label, color, _ in legend:
        cv2.line(img, (x, y - 4), (x + 18, y - 4), color, 2, cv2.LINE_AA)
        _text(img, label, (x + 22, y), 0.36)
        x += 30 + 7 * len(label)
    if "min_identity" in th:
        p1.threshold(th["min_identity"], BLUE)
    if "max_leakage" in th:
        p1.threshold(th["max_leakage"], ORANGE)
    if "max_flicker_ratio" in th:
        p2.threshold(th["max_flicker_ratio"], GREEN)
    p1.series(ident, BLUE, failing)
    p1.series(leak, ORANGE, failing)
    p2.series(flick, GREEN, failing)
    p1.legend([("identity", BLUE, False), ("min", BLUE, True), ("leakage", ORANGE, False),
               ("max", ORANGE, True), ("failing", RED, False)])
    p2.legend([("flicker ratio", GREEN, False), ("max", GREEN, True), ("failing", RED, False)])

    for t in _nice_ticks(0, max(n - 1, 1), 10):
        if t == int(t) and t < n:
            x = p3.x(int(t))
            cv2.line(img, (x, p3.bottom), (x, p3.bottom + 4), INK, 1)
            _text(img, str(int(t)), (x - 4 * len(str(int(t))), p3.bottom + 14), 0.38)
    _text(img, "frame", (6, p3.bottom + 14), 0.38)
    return img
