"""What each QA policy would deliver on the labelled set, judged by the labels.

Per run (clip x source) and track, the labelled faces in frame order with the gate's verdict on each
(the leave-one-clip-out limits, so no clip is judged by limits chosen on it). A policy turns the
verdicts into what is delivered swapped; the labels then say:

- ``delivered_ok``: of the faces delivered swapped, the share a viewer accepts (the promise);
- ``ok_delivered``: of the faces a viewer accepts, the share delivered swapped (what the studio gets);
- ``switches``: frames where a track flips between swapped and original inside its run (one shot:
  the set's runs are 24 frames, cut-free on every clip the tracker reported).

Policies (the frames are the labelled ones, every EVERY-th frame of the run):
- ``per shot``: a track with any failing face is kept original throughout (the shipped default,
  bands aside);
- ``per frame``: every failing face goes back to the original;
- ``shot share``: a track is delivered swapped when at most SHARE of its faces fail, else kept
  original throughout: one bad frame does not throw away a good shot, a bad shot still goes back.
  The shipped "keep original unless few fail" policy (swapline_core/qa/segments.py) uses the same
  share, ``FEW_FAILING_SHARE``; it also bridges failures just past a limit as "per shot" does and
  never ships a lost face (nor, where the set has those limits, an occluder painted over or a paste
  off the face), which the labelled verdicts here do not tell apart.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from swapline_core.qa.segments import FEW_FAILING_SHARE

# the shipped policy's share between a stricter and a looser one, so the simulation measures what ships
SHARES = (0.1, FEW_FAILING_SHARE, 0.3)


def _tracks(rows: list[dict], passed: np.ndarray) -> dict:
    runs = defaultdict(list)
    for r, p in zip(rows, passed):
        clip, source, frame, track = r["id"].split("|")[:4]
        runs[(clip, source, track)].append((int(frame), bool(p), bool(r["acceptable"])))
    return {k: sorted(v) for k, v in runs.items()}


def deliver(policy: str, faces: list[tuple[int, bool, bool]], share: float = 0.0) -> list[bool]:
    """Swapped (True) or original per face of one track, in frame order."""
    passed = [p for _, p, _ in faces]
    if policy == "per frame":
        return passed
    fail = 1 - sum(passed) / len(passed)
    if policy == "per shot":
        return [fail == 0] * len(passed)
    if policy == "shot share":
        return [fail <= share] * len(passed)
    raise ValueError(f"unknown policy {policy!r}")


def simulate(rows: list[dict], passed: np.ndarray) -> dict:
    tracks = _tracks(rows, passed)
    out = {}
    plans = [("per shot", 0.0), ("per frame", 0.0)] + [("shot share", s) for s in SHARES]
    for policy, share in plans:
        name = policy if policy != "shot share" else f"shot share <= {share:g}"
        per_clip: dict = defaultdict(lambda: [0, 0, 0, 0])   # delivered, delivered ok, ok, switches
        for (clip, _, _), faces in tracks.items():
            d = deliver(policy, faces, share)
            c = per_clip[clip]
            c[0] += sum(d)
            c[1] += sum(x and ok for x, (_, _, ok) in zip(d, faces))
            c[2] += sum(ok for _, _, ok in faces)
            c[3] += sum(a != b for a, b in zip(d, d[1:]))
        tot = np.array(list(per_clip.values())).sum(axis=0)
        out[name] = {**_shares(tot), "per_clip": {k: _shares(v) for k, v in sorted(per_clip.items())}}
    return out


def _shares(v) -> dict:
    delivered, good_delivered, good, switches = (int(x) for x in v)
    return {"delivered": delivered, "acceptable": good,
            "delivered_ok": round(good_delivered / delivered, 3) if delivered else None,
            "ok_delivered": round(good_delivered / good, 3) if good else None, "switches": switches}
