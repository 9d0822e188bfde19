"""One decision per shot: the "keep original" policy on track segments instead of single frames.

Frame by frame, "keep original" puts the target back on every failing frame, so inside one shot the
delivered face alternates between the source's and the target's identity whenever a frame fails
or a guard refuses a head turn. No single artefact is more visible. Here each track segment (one
tracked face between two cuts) is delivered swapped or kept original as a whole:

- a segment with a frame that failed outright, or a face the swap refused while other frames of
  the segment were swapped, is kept original over its whole span: a swap that cannot hold for
  the shot is not shown for part of it;
- a failure at most ``BAND[metric]`` past its limit, in the metric's own units (hysteresis: the
  limits decide where a segment can be swapped, the band keeps it swapped) is bridged: delivered
  swapped and listed, so one frame's mouth a hair over its limit does not revert a shot. A band
  relative to the limit would not do: a leakage limit of 0.99 or an ArcFace identity limit of 0.2
  would make every failure of that metric "marginal". Leakage failures, failures that say something was painted
  where it must not be (an occluder, off the face), a face that is no longer found, faces the swap
  did not change and metrics without a band are never bridged;
- a lone failure of a measurement made through a landmark fit or an embedding (``SPIKE``: mouth
  opening, identity, drift, mouth correlation) is bridged up to ``SPIKE[metric]`` past its limit:
  on the frame before and the frame after, the same metric passes. Those fits jitter from frame
  to frame, so over a long shot one frame's reading almost surely lands past a limit somewhere; a
  defect a viewer would see lasts longer than one frame. Pixel metrics (seams, colour, bleed) and
  flicker are what is shown, so they get no such allowance; a lone spike past ``SPIKE`` reverts;
- a segment whose faces were all refused stays as it was: the target, consistently.

The "keep original unless few fail" policy (``plan(..., few_failing_share=FEW_FAILING_SHARE)``)
decides the same way, except that a segment whose frames failing outright are at most that share of
its evaluated frames is delivered swapped with them, each listed (``shipped_failing_frames``): a few
bad frames do not throw away a good shot. A face that is lost, not swapped or unmeasured, or one
failing a ``NEVER_BRIDGED`` metric, still keeps its segment original whatever the share.

Reverting is per frame (the whole frame goes back to the original), so a reverted segment also
reverts other faces in its frames; their segments then follow (fixed point), which keeps every
track consistent inside its shot.
"""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

# How far past its limit (in the metric's own units) a failure is bridged inside a swapped segment.
# Roughly a quarter of the room the shipped limits leave; a metric not listed is never bridged
# (leakage: a result that still reads as the target was not swapped, however close to its limit).
BAND = {"identity": 0.04, "landmark_drift": 0.1, "flicker_ratio": 0.8, "mouth_delta": 0.02,
        "expression_corr": 0.1, "colour_cast": 3.0, "seam_ratio": 0.25, "bleed": 0.015}
# Metrics whose failure is a visible defect wherever it happens, however small the excess.
NEVER_BRIDGED = ("occluder_overwrite", "offface")
# Metrics read through a landmark fit or an embedding: a lone one-frame failure is bridged up to
# this far past the limit (further, it is not fit noise and reverts like a lasting one).
SPIKE = {"identity": 0.15, "landmark_drift": 0.4, "mouth_delta": 0.08, "expression_corr": 0.4}
# "keep original unless few fail": the share of a segment's evaluated frames that may fail outright
# and still ship. On the labelled faces of the shipped mesh path (docs/measurements/qa_agreement.md,
# "Policies on the labelled runs", path mesh4; bench/qa_labels/policy.py simulates it with this
# constant), leave-one-clip-out limits: per shot delivered_ok 0.917 / ok_delivered 0.356, share
# <= 0.2 0.903 / 0.413, no identity switches; 0.3 delivered more, but only 0.801 acceptable under
# the limits that shipped when the faces were made.
FEW_FAILING_SHARE = 0.2


def _shot(cuts: Sequence[int], frame: int) -> int:
    return int(np.searchsorted(np.asarray(sorted(cuts), np.int64), frame, side="right"))


def _face_state(face: dict, excess: list, lone: frozenset) -> tuple[str, list[str]]:
    """'ok', 'marginal', 'bad' or 'refused' for one evaluated face record, and its reasons.
    ``excess``: its (metric, how far past the limit; <= 0 passes) pairs; ``lone``: the metrics that
    pass on the frames before and after."""
    reasons = list(face.get("reasons") or [])
    if face.get("skip_reason"):
        return "refused", [face["skip_reason"]]
    if not reasons:
        return "ok", []
    if _lost(face):
        return "bad", reasons
    failing = [(m, x) for m, x in excess if x is not None and x > 0]
    if len(failing) != len(reasons) or any(
            m in NEVER_BRIDGED or m not in BAND or x > (SPIKE.get(m, BAND[m]) if m in lone else BAND[m])
            for m, x in failing):
        return "bad", reasons
    return "marginal", reasons


def _lost(face: dict) -> bool:
    """Not swapped, no longer found, or no identity reading: nothing says the source's face is there."""
    return face.get("swapped") is False or not face.get("redetected", True) or face.get("identity") is None


def _unshippable(face: dict, excess: list) -> bool:
    """A failure no share ships: the face is lost (``_lost``) or something was painted where it
    must not be (``NEVER_BRIDGED``). A refused face is not a failure."""
    if face.get("skip_reason"):
        return False
    return _lost(face) or any(m in NEVER_BRIDGED and x is not None and x > 0 for m, x in excess)


def _kept_why(rows: list, states: list[str], unshippable: set, share: float) -> list[str] | None:
    """Why a segment cannot be delivered swapped under "keep original unless few fail" (None: it
    can): up to ``share`` of its evaluated frames may fail outright, none of them unshippable; a
    refused face between swapped ones, or frames another face's segment reverted, keep it original
    as under "keep original"."""
    bad = [r for r, s in zip(rows, states) if s == "bad"]
    hard = [r for r in bad if r[0] in unshippable]
    if hard:
        return _why(hard, "bad")
    shown = sum(s in ("ok", "marginal", "bad") for s in states)
    if len(bad) > share * shown + 1e-9:
        return [f"{len(bad)} of {shown} evaluated frames fail outright (more than {share:.0%} of the shot)",
                *_why(bad, "bad")]
    if "refused" in states:
        return _why(rows, "refused")
    if "reverted" in states:
        return ["another face in these frames was kept original", *_why(bad, "bad")]
    return None


def _lone_failures(rows: list) -> list[frozenset]:
    """Per row (frame, face) of one segment in frame order: the metrics that pass on the segment's
    faces of the frame just before and just after it. A frame without both neighbours evaluated
    (segment ends, QA sampling every n-th frame) has none: nothing says its failure is brief."""
    passing = {i: {m for m, x in exc if x is not None and x <= 0} for i, _, exc in rows}
    return [frozenset(passing[i - 1] & passing[i + 1]) if i - 1 in passing and i + 1 in passing
            else frozenset() for i, _, _ in rows]


def plan(report: dict, excess, few_failing_share: float | None = None) -> dict:
    """The per-segment decisions for a finished report: {"revert": set of frames, "segments": [...]}.

    ``excess(face)`` yields (metric, how far past its limit) for a face record against the
    thresholds the report was judged with (decide.face_excess). Segments carry track, shot, first/last frame,
    the decision ("swapped", "kept original", "refused") and why. ``few_failing_share``: a segment
    ships with up to that share of its evaluated frames failing outright (``_kept_why``).
    """
    cuts = list(report.get("cuts") or [])
    frames = {rec["frame"]: rec for rec in report["frames"]}
    faces: dict = defaultdict(list)                # (track, shot) -> [(frame, face, excess)]
    for i in sorted(frames):
        rec = frames[i]
        if rec["status"] in ("skipped", "no_face"):
            continue
        for f in rec.get("faces") or []:
            faces[(f.get("track_id"), _shot(cuts, i))].append((i, f, excess(f)))
    seg_frames: dict = {}                          # (track, shot) -> [(frame, state, reasons)]
    for key, rows in faces.items():
        seg_frames[key] = [(i, *_face_state(f, exc, lone))
                           for (i, f, exc), lone in zip(rows, _lone_failures(rows))]
    unshippable = {key: {i for i, f, exc in rows if _unshippable(f, exc)} for key, rows in faces.items()}
    # a segment spans its first to last evaluated frame: frames sampled out in between follow it
    span = {key: (rows[0][0], rows[-1][0]) for key, rows in seg_frames.items()}
    revert: set[int] = set()
    decided: dict = {}
    changed = True
    while changed:                                 # reverting frames can make other segments mixed
        changed = False
        for key, rows in seg_frames.items():
            if decided.get(key, ("",))[0] == "kept original":
                continue
            states = [("refused" if s == "refused" else "reverted" if i in revert else s) for i, s, _ in rows]
            shown = [s for s in states if s in ("ok", "marginal", "bad")]
            if not shown:
                decided[key] = ("refused", _why(rows, "refused"))
                continue
            if few_failing_share is not None:
                why = _kept_why(rows, states, unshippable[key], few_failing_share)
            elif any(s in ("bad", "refused", "reverted") for s in states):
                why = (_why(rows, "bad") or _why(rows, "refused")
                       or ["another face in these frames was kept original"])
            else:
                why = None
            decided[key] = ("kept original", why) if why is not None else ("swapped", [])
            if decided[key][0] == "kept original":
                a, b = span[key]
                new = {i for i in range(a, b + 1) if i in frames} - revert
                if new:
                    revert |= new
                    changed = True
    segments = []
    for key in sorted(seg_frames, key=lambda k: (span[k][0], str(k[0]))):
        decision, why = decided[key]
        rows = seg_frames[key]
        bridged = [i for i, s, _ in rows if s == "marginal"] if decision == "swapped" else []
        shipped = [i for i, s, _ in rows if s == "bad"] if decision == "swapped" else []
        seg = {"track_id": key[0], "shot": key[1], "first": span[key][0], "last": span[key][1],
               "frames": len(rows), "decision": decision, "reasons": why[:3]}
        if bridged:
            seg["bridged_frames"] = bridged
        if shipped:
            seg["shipped_failing_frames"] = shipped
        if bridged or shipped:
            seg["reasons"] = (_why(rows, "bad") + _why(rows, "marginal"))[:3]
        segments.append(seg)
    return {"revert": revert, "segments": segments}


def reason_kind(reason: str) -> str:
    """A reason without its numbers: "colour cast: chroma shift 12.3 > 10" -> "colour cast: chroma shift"."""
    return re.split(r"\s*(?:\(|[<>]|-?\d)", reason, maxsplit=1)[0].strip(" :") or reason


def _why(rows, state: str) -> list[str]:
    """The distinct kinds of reason of the rows in ``state``, most frequent first: the first one's
    full text (its numbers) and on how many frames it came up."""
    count: dict = defaultdict(list)
    first: dict = {}
    for i, s, why in rows:
        if s == state:
            for x in why:
                c = reason_kind(x)
                if not count[c] or count[c][-1] != i:
                    count[c].append(i)
                first.setdefault(c, x)
    return [f"{first[c]} (frame {fr[0]}{'' if len(fr) == 1 else f' and {len(fr) - 1} more'})"
            for c, fr in sorted(count.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))]
