"""One decision per shot: the "keep original" policy on track segments instead of single frames.

Frame by frame, "keep original" puts the target back on every failing frame, so inside one shot the
delivered face alternates between the source's and the target's identity whenever a frame fails
or a guard refuses a head turn. No single artefact is more visible. Here each track segment (one
tracked face between two cuts) is delivered swapped or kept original as a whole:

- a segment with a frame that failed outright, or a face the swap refused while other frames of
  the segment were swapped, is kept original over its whole span: a swap that cannot hold for
  the shot is not shown for part of it;
- a failure within ``BRIDGE_LOAD`` of its limits (hysteresis: the limits decide where a segment
  can be swapped, the band keeps it swapped) is bridged: delivered swapped and listed, so one
  frame's mouth 0.3 % over its limit does not revert a shot. Failures that say something was
  painted where it must not be (an occluder, off the face), a face that is no longer found and
  faces the swap did not change are never bridged;
- a lone failure of a measurement made through a landmark fit or an embedding (``FIT_METRICS``:
  mouth opening, identity, drift) is bridged up to ``SPIKE_LOAD``: on the frame before and the
  frame after, the same metric passes. Those fits jitter from frame to frame, so over a long shot
  one frame's reading almost surely lands past a limit somewhere; a defect a viewer would see
  lasts longer than one frame. Pixel metrics (seams, colour, bleed) and flicker are what is shown,
  so they get no such allowance; a lone spike past ``SPIKE_LOAD`` still reverts;
- a segment whose faces were all refused stays as it was: the target, consistently.

Reverting is per frame (the whole frame goes back to the original), so a reverted segment also
reverts other faces in its frames; their segments then follow (fixed point), which keeps every
track consistent inside its shot.
"""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

# A failing metric at most this far past its limit (value/limit for maxima, the shortfall
# relative to the room below 1 for minima, decide.metric_load) is bridged inside a swapped segment.
BRIDGE_LOAD = 1.25
# Metrics whose failure is a visible defect wherever it happens, however small the excess.
NEVER_BRIDGED = ("occluder_overwrite", "offface")
# Metrics read through a landmark fit or an embedding, whose lone one-frame failures are bridged.
FIT_METRICS = ("identity", "leakage", "landmark_drift", "mouth_delta", "expression_corr")
# A lone failure this far past its limit is not fit noise: it reverts like a lasting one.
SPIKE_LOAD = 2.0


def _shot(cuts: Sequence[int], frame: int) -> int:
    return int(np.searchsorted(np.asarray(sorted(cuts), np.int64), frame, side="right"))


def _face_state(face: dict, lds: list, lone: frozenset) -> tuple[str, list[str]]:
    """'ok', 'marginal', 'bad' or 'refused' for one evaluated face record, and its reasons.
    ``lds``: its (metric, load) pairs; ``lone``: the metrics that pass on the frames before and after."""
    reasons = list(face.get("reasons") or [])
    if face.get("skip_reason"):
        return "refused", [face["skip_reason"]]
    if not reasons:
        return "ok", []
    if face.get("swapped") is False or not face.get("redetected", True) or face.get("identity") is None:
        return "bad", reasons
    failing = [(m, lo) for m, lo in lds if lo is not None and lo > 1.0]
    if len(failing) != len(reasons) or any(
            m in NEVER_BRIDGED or lo > (SPIKE_LOAD if m in lone and m in FIT_METRICS else BRIDGE_LOAD)
            for m, lo in failing):
        return "bad", reasons
    return "marginal", reasons


def _lone_failures(rows: list) -> list[frozenset]:
    """Per row (frame, face) of one segment in frame order: the metrics that pass on the segment's
    faces of the frame just before and just after it. A frame without both neighbours evaluated
    (segment ends, QA sampling every n-th frame) has none: nothing says its failure is brief."""
    passing = {i: {m for m, lo in lds if lo is not None and lo <= 1.0} for i, _, lds in rows}
    return [frozenset(passing[i - 1] & passing[i + 1]) if i - 1 in passing and i + 1 in passing
            else frozenset() for i, _, _ in rows]


def plan(report: dict, loads) -> dict:
    """The per-segment decisions for a finished report: {"revert": set of frames, "segments": [...]}.

    ``loads(face)`` yields (metric, load) for a face record against the thresholds the report was
    judged with (decide.face_loads). Segments carry track, shot, first/last frame,
    the decision ("swapped", "kept original", "refused") and why.
    """
    cuts = list(report.get("cuts") or [])
    frames = {rec["frame"]: rec for rec in report["frames"]}
    faces: dict = defaultdict(list)                # (track, shot) -> [(frame, face, loads)]
    for i in sorted(frames):
        rec = frames[i]
        if rec["status"] in ("skipped", "no_face"):
            continue
        for f in rec.get("faces") or []:
            faces[(f.get("track_id"), _shot(cuts, i))].append((i, f, loads(f)))
    seg_frames: dict = {}                          # (track, shot) -> [(frame, state, reasons)]
    for key, rows in faces.items():
        seg_frames[key] = [(i, *_face_state(f, lds, lone))
                           for (i, f, lds), lone in zip(rows, _lone_failures(rows))]
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
            if any(s in ("bad", "refused", "reverted") for s in states):
                decided[key] = ("kept original", _why(rows, "bad") or _why(rows, "refused")
                                or ["another face in these frames was kept original"])
                a, b = span[key]
                new = {i for i in range(a, b + 1) if i in frames} - revert
                if new:
                    revert |= new
                    changed = True
                continue
            decided[key] = ("swapped", [])
    segments = []
    for key in sorted(seg_frames, key=lambda k: (span[k][0], str(k[0]))):
        decision, why = decided[key]
        rows = seg_frames[key]
        bridged = [i for i, s, _ in rows if s == "marginal"] if decision == "swapped" else []
        seg = {"track_id": key[0], "shot": key[1], "first": span[key][0], "last": span[key][1],
               "frames": len(rows), "decision": decision, "reasons": why[:3]}
        if bridged:
            seg["bridged_frames"] = bridged
            seg["reasons"] = _why([r for r in rows if r[1] == "marginal"], "marginal")[:3]
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
