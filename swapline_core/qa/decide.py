"""Thresholds, per-face reasons, the job decision and the failing-frame policies.

Defaults come from ``thresholds.json`` beside this file, written by ``calibration/calibrate_qa.py``
from known-good and known-bad outputs of the sample clip; the table and how each number was
chosen are in ``docs/measurements/qa_thresholds.md``. They hold for the built-in analyzer
(MTCNN + dlib, recognizer ``dlib_resnet_v1``); identity and leakage of other recognizers live on
another scale (:data:`ARCFACE_IDENTITY`).
"""
from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import numpy as np

from ..errors import SwaplineError
from . import segments
from .safety import summarize as summarize_safety

FORMAT = "swapline.qa.v2"
# Per shot like "keep original", but a shot with at most segments.FEW_FAILING_SHARE of its evaluated
# frames failing outright ships with them listed: a few bad frames do not throw away a good shot.
FEW_FAILING_POLICY = "keep original unless few fail"
POLICIES = ("flag only", "keep original", FEW_FAILING_POLICY, "keep original per frame", "fail job")
SHARE_WHY = "within the shot's failing share"      # why a failing frame shipped under FEW_FAILING_POLICY
# A production run decides per shot (segments.py): a face does not flip between the source's and the
# target's identity inside one shot. By default a shot with at most a fifth of its frames failing
# ships swapped with them listed: judged by eye on clips nobody here had tuned on, what it delivers
# stays above 0.9 acceptable and it delivers about twice the acceptable faces "keep original" does
# (docs/measurements/qa_heldout.md, docs/qa.md#policies). A lost face never ships, nor a painted-over
# occluder or a paste off the face where the limit set has those limits (the labelled sets leave them
# off: their labels do not show them separating); the report lists every failing frame that shipped and why.
DEFAULT_POLICY = FEW_FAILING_POLICY
METRICS = ("identity", "leakage", "landmark_drift", "flicker_ratio", "mouth_delta", "eye_delta",
           "expression_corr", "occluder_overwrite", "colour_cast", "seam_ratio", "bleed", "offface",
           "blotch", "chroma_blotch", "detail_ratio", "texture_excess")
THRESHOLDS_FILE = Path(__file__).with_name("thresholds.json")
# Named limit sets (the QA node's "limit_set"): the sample clip's calibration, and the limits chosen
# by a rule on faces labelled by eye over many clips (bench/qa_labels, docs/measurements/qa_agreement.md).
LIMIT_SETS = {"calibrated (sample clip)": THRESHOLDS_FILE,
              "viewer-labelled (strict)": Path(__file__).with_name("thresholds_labelled.json"),
              "viewer-labelled (mesh swap)": Path(__file__).with_name("thresholds_labelled_mesh.json")}
# "auto": a labelled set where the swap is the path it was measured on (the built-in classical
# warp, the built-in mesh warp), the calibrated set elsewhere (no labelled faces of a trained
# swapper exist yet).
AUTO_LIMIT_SET = "auto (viewer-labelled for the built-in swap)"
DEFAULT_LIMIT_SET = AUTO_LIMIT_SET
# the swap method (provenance method.swap_record) each labelled set measured -> that set
MEASURED_ON = {"classical landmark warp": "viewer-labelled (strict)",
               "dense mesh texture warp": "viewer-labelled (mesh swap)"}
# A limit a set does not give: off (the metric is reported, never fails a face on its own).
OFF = 1e9
# ArcFace similarities: same person ~0.4-0.8, different people < 0.2 (not measured on real
# buffalo_l weights, none can be downloaded here).
ARCFACE_IDENTITY = {"min_identity": 0.2, "max_leakage": 0.6}


def _load_defaults(path: Path = THRESHOLDS_FILE) -> dict:
    try:
        return json.loads(path.read_text())["thresholds"]
    except (OSError, ValueError, KeyError) as e:
        raise SwaplineError(f"cannot read the QA limits {path}: {e}. Reinstall the pack, or regenerate the file "
                            "(thresholds.json: calibration/calibrate_qa.py; thresholds_labelled*.json: "
                            "python -m bench.qa_labels.agreement --write-limits)") from e


_D = _load_defaults()


@dataclass(frozen=True)
class QAThresholds:
    """Per-face limits (a frame fails when any face breaks one) and job-level rules."""
    min_identity: float = _D["min_identity"]
    max_leakage: float = _D["max_leakage"]
    max_landmark_drift: float = _D["max_landmark_drift"]
    max_flicker_ratio: float = _D["max_flicker_ratio"]
    max_mouth_delta: float = _D["max_mouth_delta"]           # |mouth opening result - target|, jaw widths
    min_expression_corr: float = _D["min_expression_corr"]   # mouth movement (profile) correlation over the window
    expression_window: int = _D["expression_window"]         # evaluated frames per correlation window
    max_occluder_overwrite: float = _D["max_occluder_overwrite"]
    max_colour_cast: float = _D["max_colour_cast"]           # chroma shift (a*, b*), worse face half
    max_seam_ratio: float = _D["max_seam_ratio"]
    max_bleed: float = _D["max_bleed"]
    max_offface: float = _D["max_offface"]
    max_blotch: float = _D.get("max_blotch", OFF)             # lightness spread of the change over the skin
    max_chroma_blotch: float = _D.get("max_chroma_blotch", OFF)  # chroma spread of the change over the skin
    max_detail_ratio: float = _D.get("max_detail_ratio", OFF)  # fine detail result / target (pasted texture)
    max_texture_excess: float = _D.get("max_texture_excess", OFF)  # the same, where on the skin it is worst
    min_changed: float = _D["min_changed"]                   # share of the face hull: below = not swapped
    min_coverage: float = _D["min_coverage"]                 # per track: swapped / frames with the face
    # A policy, not calibrated: a user-supplied classifier's score (0..1) above which a frame is
    # flagged as unsafe content and the job fails (see ``safety``; frames are never changed for it).
    max_safety_score: float = 0.5
    require_redetection: bool = True
    # Every swapped face fails when Build Face Model warned that the source photo is small or soft
    # (``faces.source_check``): on by default with the labelled sets only (``limit_set``), where the
    # labels show it (SOURCE_WARNING_REASON says why).
    fail_on_source_warning: bool = False
    allow_no_face: bool = False      # a clip with nothing evaluated passes only when this is set
    max_fail_fraction: float = 0.0   # decision "fail" when failing/evaluated frames exceed this
    match_iou: float = 0.3           # a re-detected face belongs to a tracked face above this IoU

    def to_json(self) -> dict:
        return asdict(self)

    def shown(self) -> dict:
        """``to_json`` for people and charts (:func:`shown`)."""
        return shown(asdict(self))


def resolve_limit_set(name: str, swap_methods: Sequence[str] = ()) -> str:
    """The named set a choice stands for: "auto" is the labelled set when every swap stage that
    made the frames is the method it was measured on, else the calibrated one."""
    if name != AUTO_LIMIT_SET:
        return name
    for method, chosen in MEASURED_ON.items():
        if swap_methods and all(m.startswith(method) for m in swap_methods):
            return chosen
    return "calibrated (sample clip)"


def limits_note(name: str, source_warnings: Sequence[str] = (), fails: bool = False) -> str:
    """What the report says about how far the chosen limit set's verdicts are known to hold. The
    labelled sets were chosen on faces swapped from sharp, evenly lit, frontal source photos: with
    a small, side-lit or unusual one the gate passed faces viewers reject about half the time on
    the labelled clips (docs/qa.md, "The labelled set"), so a source the source check warned about
    is named, and with ``fails`` (``fail_on_source_warning``) the note says every swapped face
    failed for it."""
    if not name.startswith("viewer-labelled"):
        return ("limits not measured against faces labelled by eye for this swap "
                "(docs/measurements/qa_agreement.md measures the built-in swap)")
    scope = ("limits chosen on faces labelled by eye, swapped from sharp, evenly lit source photos; "
             "with a small, side-lit or unusual source photo their verdicts agree less with viewers (docs/qa.md)")
    if source_warnings:
        failed = (" Every swapped face fails for it (QA Gate's fail_on_source_warning): viewers accepted 14 % of "
                  "the faces swapped from such a photo." if fails else "")
        return f"{scope}. This job's source photo was flagged by Build Face Model: {source_warnings[0]}.{failed}"
    return scope


def is_off(value: float) -> bool:
    """A limit no face can break (``OFF`` for a maximum, ``-OFF`` for a minimum)."""
    return abs(float(value)) >= OFF


def shown(limits: dict) -> dict:
    """Limits (``QAThresholds`` fields, as in a report) for people and charts: an off limit is None,
    not a huge number."""
    return {k: (None if isinstance(v, float) and is_off(v) else v) for k, v in limits.items()}


def limit_set(name: str = "calibrated (sample clip)") -> QAThresholds:
    """The named set's limits. A labelled set gives the per-face limits its rule chose; every other
    per-face metric is off (reported, failing no face on its own): the rule found it did not
    separate the faces viewers accept from those they reject, so the sample clip's value must not
    fail faces behind its back. The job-level rules (not swapped, coverage, windows) stay."""
    if name not in LIMIT_SETS:
        raise ValueError(f"unknown QA limit set {name!r}; known: {sorted(LIMIT_SETS)}")
    base = QAThresholds()
    if LIMIT_SETS[name] == THRESHOLDS_FILE:
        return base
    names = {f.name for f in fields(QAThresholds)}
    off = {field: (-OFF if kind == "min" else OFF) for _, field, kind, *_ in _CHECKS}
    chosen = {k: v for k, v in _load_defaults(LIMIT_SETS[name]).items() if k in names}
    return replace(base, **{**off, **chosen, "fail_on_source_warning": True})


def thresholds_for(recognizer: str, limit_set_name: str = "calibrated (sample clip)", **given) -> QAThresholds:
    """The named set's limits for the recognizer, overridden by ``given`` (None values are ignored).
    Identity and leakage come from the dlib recognizer's labels or calibration: an ArcFace pack
    gets its own (uncalibrated) pair."""
    base = limit_set(limit_set_name)
    if not recognizer.startswith("dlib"):
        base = replace(base, **ARCFACE_IDENTITY)
    names = {f.name for f in fields(QAThresholds)}
    unknown = set(given) - names
    if unknown:
        raise ValueError(f"unknown QA threshold(s) {sorted(unknown)}; known: {sorted(names)}")
    return replace(base, **{k: v for k, v in given.items() if v is not None})


class QAFailedError(SwaplineError):
    def __init__(self, failing: Sequence[int], summary: dict):
        self.failing = list(failing)
        why = "; ".join(summary.get("decision_reasons", [])) or "failing frames"
        where = f" ({summary['report']})" if summary.get("report") else ""
        super().__init__(
            f"QA failed ({why}): {len(self.failing)} of {summary.get('evaluated', '?')} evaluated frames fail: "
            f"{format_frames(self.failing)}. Inspect the QA report{where}, adjust the thresholds, or set the "
            "policy to 'keep original' or 'flag only'.")


def format_frames(indices: Iterable[int], limit: int = 40) -> str:
    """'3-7, 12, 20-21' style, truncated: error messages must stay readable for long clips."""
    idx = sorted({int(i) for i in indices})
    runs: list[list[int]] = []
    for i in idx:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    runs_s = [str(a) if a == b else f"{a}-{b}" for a, b in runs]
    more = f" (+{len(runs_s) - limit} more ranges)" if len(runs_s) > limit else ""
    return ", ".join(runs_s[:limit]) + more if runs_s else "none"


def r(v, nd: int = 4):
    return None if v is None or not np.isfinite(v) else round(float(v), nd)


# (metric, threshold field, "min"/"max", label, format) in the order reasons are listed
_CHECKS = (
    ("identity", "min_identity", "min", "identity", ".3f"),
    ("leakage", "max_leakage", "max", "leakage", ".3f"),
    ("landmark_drift", "max_landmark_drift", "max", "landmark drift", ".3f"),
    ("flicker_ratio", "max_flicker_ratio", "max", "flicker ratio", ".2f"),
    ("mouth_delta", "max_mouth_delta", "max", "mouth opening differs from the target's by", ".3f"),
    ("expression_corr", "min_expression_corr", "min", "mouth does not follow the target: correlation", ".2f"),
    ("occluder_overwrite", "max_occluder_overwrite", "max", "occluder painted over: share", ".2f"),
    ("colour_cast", "max_colour_cast", "max", "colour cast: chroma shift", ".1f"),
    ("seam_ratio", "max_seam_ratio", "max", "seam at the paste boundary: gradient ratio", ".2f"),
    ("bleed", "max_bleed", "max", "foreign colour bled into the face: share", ".3f"),
    ("offface", "max_offface", "max", "pasted off the face: changed area outside the face", ".2f"),
    ("blotch", "max_blotch", "max", "blotch: uneven lightness change over the skin", ".1f"),
    ("chroma_blotch", "max_chroma_blotch", "max", "blotch: uneven colour change over the skin", ".1f"),
    ("detail_ratio", "max_detail_ratio", "max", "pasted texture: fine detail against the target's", ".2f"),
    ("texture_excess", "max_texture_excess", "max", "pasted texture on part of the skin: fine detail against the "
                                                    "target's", ".2f"),
)


# Why a labelled set fails the faces of a source Build Face Model warned about: the built-in swaps
# paste the source's own pixels, and from the development set's small source (eyes 47 px apart,
# enlarged: no fine detail at any size) viewers accept 32 of 226 faces of the shipped mesh path;
# its limits pass 79 of them, 30 acceptable (docs/qa.md, "A source the source check warns about").
SOURCE_WARNING_REASON = "source photo flagged by Build Face Model (small or soft)"


def face_reasons(th: QAThresholds, f: dict, source_warned: bool = False) -> list[str]:
    """Why one face record fails (empty: it passes). Faces that were not swapped at all carry one
    reason and no quality reasons: there is no swap to judge."""
    if f.get("swapped") is False:
        return [f"face not swapped (changed {f.get('changed', 0):.2f} of the face < {th.min_changed:g})"]
    out = []
    if th.fail_on_source_warning and source_warned:
        out.append(SOURCE_WARNING_REASON)
    if th.require_redetection and not f.get("redetected", True):
        out.append("swapped face not re-detected")
    for metric, field, kind, label, fmt in _CHECKS:
        v, lim = f.get(metric), getattr(th, field)
        if v is None:
            if metric == "identity":
                out.append("identity not measured")
            continue
        if (kind == "min" and v < lim) or (kind == "max" and v > lim):
            out.append(f"{label} {v:{fmt}} {'<' if kind == 'min' else '>'} {lim:g}")
    return out


def frame_status(faces: list[dict]) -> str:
    return "fail" if any(f["reasons"] for f in faces) else "ok"


# -- accumulation and report ----------------------------------------------------------------
class QAAccumulator:
    """Collects per-frame records (small dicts); numbers are derived from them at report time."""

    def __init__(self) -> None:
        self.records: list[dict] = []

    def add(self, records: Iterable[dict]) -> None:
        self.records.extend(records)

    def failing_frames(self) -> list[int]:
        return [rec["frame"] for rec in self.records if rec["status"] == "fail"]

    def coverage(self, skipped: dict | None = None) -> dict:
        """Per track: frames with the tracked face, frames whose swap changed it, faces the swap
        stage skipped on purpose (``skipped`` = {frame: {track_id: reason}}, e.g. from
        ``video.stages.swap_refusals``), by reason category."""
        per: dict = defaultdict(lambda: {"frames": 0, "swapped": 0, "skipped": defaultdict(int)})
        for rec in self.records:
            for f in rec["faces"]:
                t = per[str(f.get("track_id"))]
                t["frames"] += 1
                if f.get("swapped"):
                    t["swapped"] += 1
                elif skipped and f.get("track_id") in skipped.get(rec["frame"], {}):
                    # by category ("too small", "head turned"): the full reason, with its numbers,
                    # is on the face's record (skip_reason)
                    why = skipped[rec["frame"]][f.get("track_id")]
                    t["skipped"][why.split(":", 1)[0].strip() or why] += 1
        out = {}
        for k, t in per.items():
            out[k] = {"frames": t["frames"], "swapped": t["swapped"], "skipped": dict(t["skipped"]),
                      "coverage": round(t["swapped"] / t["frames"], 4) if t["frames"] else None}
        return out

    def summary(self, th: QAThresholds, skipped: dict | None = None, safety_model: dict | None = None) -> dict:
        counts = {s: 0 for s in ("ok", "fail", "no_face", "skipped")}
        for rec in self.records:
            counts[rec["status"]] = counts.get(rec["status"], 0) + 1
        evaluated = counts["ok"] + counts["fail"]
        fraction = counts["fail"] / evaluated if evaluated else 0.0
        stats = {}
        for m in METRICS:
            vals = [f[m] for rec in self.records for f in rec["faces"] if f.get(m) is not None]
            if vals:
                a = np.asarray(vals, np.float64)
                stats[m] = {"n": len(vals), "mean": r(a.mean()), "median": r(np.median(a)),
                            "p5": r(np.percentile(a, 5)), "p95": r(np.percentile(a, 95)),
                            "min": r(a.min()), "max": r(a.max())}
            else:
                stats[m] = {"n": 0}
        faces = [f for rec in self.records for f in rec["faces"]]
        redetected = [f["redetected"] for f in faces if f.get("swapped", True)]
        coverage = self.coverage(skipped)
        swapped = sum(t["swapped"] for t in coverage.values())
        n_skipped = {}
        for t in coverage.values():
            for k, v in t["skipped"].items():
                n_skipped[k] = n_skipped.get(k, 0) + v
        reasons = []
        if swapped == 0 and not th.allow_no_face:
            reasons.append("no face swapped" + ("" if faces else " (no face found in any evaluated frame)"))
        low = {k: t["coverage"] for k, t in coverage.items()
               if t["coverage"] is not None and t["coverage"] < th.min_coverage}
        if low and swapped:
            reasons.append("coverage below " + f"{th.min_coverage:g}: " +
                           ", ".join(f"track {k} {v:.2f}" for k, v in sorted(low.items())))
        if counts["fail"] and fraction > th.max_fail_fraction:
            reasons.append(f"{counts['fail']} of {evaluated} evaluated frames fail")
        safety = summarize_safety(self.records, th.max_safety_score, safety_model)
        if safety and safety["flagged_frames"]:
            reasons.append(f"content safety: {len(safety['flagged_frames'])} frame(s) score above "
                           f"{th.max_safety_score:g} ({format_frames(safety['flagged_frames'], 10)}); "
                           "the frames are unchanged, review them")
        return {"frames": len(self.records), **counts, "evaluated": evaluated,
                "fail_fraction": round(fraction, 4), "failing_frames": self.failing_frames(),
                "redetection_rate": r(np.mean(redetected)) if redetected else None,
                "faces_swapped": swapped, "faces_skipped": n_skipped, "coverage": coverage,
                "metrics": stats, "safety": safety, "decision_reasons": reasons,
                "decision": "fail" if reasons else "pass"}

    def report(self, th: QAThresholds, models: list[dict] | None = None, skipped: dict | None = None,
               safety_model: dict | None = None) -> dict:
        summary = self.summary(th, skipped, safety_model)
        return {"format": FORMAT, "decision": summary["decision"], "summary": summary,
                "thresholds": th.to_json(), "models": list(models or []), "frames": self.records}


# -- policy ---------------------------------------------------------------------------------
def apply_policy(policy: str, report: dict) -> set[int]:
    """Frame indices whose output should be replaced by the original frame.

    "flag only": none; "keep original": per track segment (one face between two cuts, see
    ``segments``): a segment that cannot be swapped throughout is kept original as a whole, a
    failure just past its limits inside a swapped segment is bridged; the decisions go into
    ``report["segments"]``. "keep original unless few fail": the same, but a segment whose frames
    failing outright are at most ``segments.FEW_FAILING_SHARE`` of its evaluated frames (none of
    them a lost face, an occluder painted over or a paste off the face) is delivered swapped with
    them. "keep original per frame": every failing frame (even when the
    decision passes under ``max_fail_fraction``, a bad frame is still better replaced);
    "fail job": raise when the decision is "fail". Frames are replaced, never dropped, so the
    frame count always holds. ``report["shipped_failing"]`` lists every failing frame delivered
    swapped, with why.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown QA policy {policy!r}; expected one of {POLICIES}")
    failing = [rec["frame"] for rec in report["frames"] if rec["status"] == "fail"]
    if policy == "fail job" and report["decision"] == "fail":
        raise QAFailedError(failing, report["summary"])
    revert: set[int] = set()
    if policy in ("keep original", FEW_FAILING_POLICY):
        th = _report_thresholds(report)
        share = segments.FEW_FAILING_SHARE if policy == FEW_FAILING_POLICY else None
        decided = segments.plan(report, lambda f: face_excess(th, f), few_failing_share=share)
        report["segments"] = decided["segments"]
        revert = decided["revert"]
    elif policy == "keep original per frame":
        revert = set(failing)
    report["shipped_failing"] = shipped_failing(report, revert, policy)
    return revert


def shipped_failing(report: dict, revert: set[int], policy: str) -> list[dict]:
    """Every failing frame delivered swapped: frame, each failing face's track and reasons, and why
    it shipped (bridged inside a swapped shot, within the shot's failing share, or the policy ships
    failures)."""
    segs = report.get("segments") or []
    bridged = {i for seg in segs for i in seg.get("bridged_frames") or []}
    in_share = {i for seg in segs for i in seg.get("shipped_failing_frames") or []}
    out = []
    for rec in report["frames"]:
        if rec["status"] != "fail" or rec["frame"] in revert:
            continue
        whys = ([SHARE_WHY] if rec["frame"] in in_share else []) + (
            ["bridged: within its metric's band inside a swapped shot"] if rec["frame"] in bridged else [])
        why = "; ".join(whys) or f"policy '{policy}' ships failing frames"
        out.append({"frame": rec["frame"], "why": why,
                    "faces": [{"track_id": f.get("track_id"), "reasons": f["reasons"]}
                              for f in rec.get("faces") or [] if f.get("reasons")]})
    return out


def merge_chunk(first_index: int, originals: Sequence[np.ndarray], swapped: Sequence[np.ndarray],
                keep_original: set[int]) -> list[np.ndarray]:
    """The output chunk under a policy: one frame out per frame in, originals where chosen."""
    if len(originals) != len(swapped):
        raise ValueError(f"{len(originals)} original frames but {len(swapped)} swapped")
    return [o if first_index + k in keep_original else s for k, (o, s) in enumerate(zip(originals, swapped))]


# -- chart values ------------------------------------------------------------------------------
# Metrics the charts draw as "load": value relative to its limit, 1 = at the limit, above fails.
LOAD_METRICS = tuple((m, f, k) for m, f, k, _, _ in _CHECKS if m not in ("identity", "leakage", "flicker_ratio"))


def metric_load(th: QAThresholds, metric: str, field: str, kind: str, v: float | None) -> float | None:
    """How far a value is toward its limit: max-limits v/limit; min-limits (1 - v)/(1 - limit)
    (both similarities and correlations top out at 1); None where the limit is off."""
    if v is None:
        return None
    lim = float(getattr(th, field))
    if is_off(lim):
        return None
    if kind == "max":
        return float(v) / lim if lim > 0 else None
    return (1.0 - float(v)) / max(1.0 - lim, 1e-6)


def face_loads(th: QAThresholds, face: dict) -> list[tuple[str, float | None]]:
    """(metric, load) for every check of one face record (:func:`metric_load`)."""
    return [(m, metric_load(th, m, f, k, face.get(m))) for m, f, k, _, _ in _CHECKS]


def face_excess(th: QAThresholds, face: dict) -> list[tuple[str, float | None]]:
    """(metric, how far past its limit in the metric's own units; <= 0 passes) for every check."""
    out = []
    for m, f, k, _, _ in _CHECKS:
        v, lim = face.get(m), float(getattr(th, f))
        out.append((m, None if v is None else (float(v) - lim if k == "max" else lim - float(v))))
    return out


def _report_thresholds(report: dict) -> QAThresholds:
    return QAThresholds(**{k: v for k, v in report.get("thresholds", {}).items()
                           if k in QAThresholds.__dataclass_fields__})


def compact_frames(report: dict) -> list[dict]:
    """Per frame, the worst face's numbers and loads: what the editor's chart needs (the JSON
    report has everything)."""
    th = _report_thresholds(report)
    out = []
    for rec in report["frames"]:
        faces = rec.get("faces") or []

        ident = [f["identity"] for f in faces if f.get("identity") is not None]
        flick = [f["flicker_ratio"] for f in faces if f.get("flicker_ratio") is not None]
        row = {"index": rec["frame"], "status": rec["status"], "identity": min(ident) if ident else None,
               "flicker_ratio": max(flick) if flick else None}
        loads = {}
        for metric, field, kind in LOAD_METRICS:
            vals = [metric_load(th, metric, field, kind, f.get(metric)) for f in faces]
            vals = [v for v in vals if v is not None]
            if vals:
                loads[metric] = round(max(vals), 3)
        if rec.get("safety") is not None:
            loads["content_safety"] = round(rec["safety"] / max(th.max_safety_score, 1e-6), 3)
        row["loads"] = loads
        reasons = [x for f in faces for x in f.get("reasons", [])]
        if reasons:
            row["reasons"] = reasons[:4]
        out.append(row)
    return out
