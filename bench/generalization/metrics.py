"""Per-run metrics of the generalization section: what the pipeline delivered, and an independent score.

Pipeline-side (the nodes' own reports): every tracked (frame, face) pair gets one outcome, read from
the QA gate's JSON report (its per-face records carry the swap stage's refusals and the gate's
reasons) and the gate's reverted frames:
  delivered    swapped, the face passes the gate and its frame was not reverted
  refused      the swap stage refused it (guards, the swapper's competence), by reason
  qa_failed    swapped, but the gate failed it and its frame was reverted ("keep original" decides
               per shot segment: the whole segment went back)
  bridged      swapped, failed the gate just past a limit, but delivered: its segment stayed swapped
  reverted     swapped and passing, but its segment (or another face's in the frame) was kept
               original, so the frame was reverted
``yield`` is the delivered share of the eligible pairs: the tracked face >= MIN_FACE px tall (its box)
and |yaw| <= MAX_YAW degrees (the pipeline's head-pose estimate on the tracked five points; the
pipeline's, since the pairs are its tracked faces). ``identity_switches`` counts frames where a
track's delivered state (swapped / original) differs from the track's previous frame inside one
shot (cuts as the tracker reported them); all tracked pairs count, eligible or not.

Scorer-side (bench/quality/score.py: dlib HOG + 68 points + ResNet embedding, no code shared with
the pipeline's MTCNN path), on the input frames and the delivered frames.
"""
from __future__ import annotations

from collections import Counter

import cv2
import numpy as np

from swapline_core.qa.segments import reason_kind

from ..quality import cases as qcases
from ..quality import score

MIN_FACE, MAX_YAW = 40, 45.0
FRONTAL = 0.15          # scorer yaw ratio below which a face counts as frontal (as bench/quality)
OFF_FACE_SHARE = 0.01   # changed pixels outside every face box above 1 % of the box area: a paste off the face
# The target's inner-lip opening (inter-ocular units) must span this, 10th to 90th percentile, for a
# correlation: the full range let one landmark misfit decide (the vace dancer's closed mouth read 0.135
# on one tilted frame, 0.021-0.071 on the other 23: span 0.047; the talking clips' spans 0.10-0.13).
MOUTH_MOVES = 0.08
NEAREST = 8             # a frame where HOG found no face borrows the boxes of a frame this near


def category(reason: str) -> str:
    """A reason without its numbers: "colour cast: chroma shift 12.3 > 10" -> "colour cast: chroma shift"."""
    return reason_kind(reason)


def refusal_category(reason: str) -> str:
    # the gate's own grouping of refusals (decide.QAAccumulator.coverage): the text before ":"
    return reason.split(":", 1)[0].strip() or reason


def pairs(qa: dict, faces: list[list]) -> list[dict]:
    """One record per tracked (frame, face): outcome, reasons, size, yaw and eligibility."""
    from swapline_core.guards.pose import head_pose

    reverted = set(qa.get("reverted_frames") or [])
    out = []
    for rec in qa["frames"]:
        i = rec["frame"]
        kps = {f.track_id: f.kps for f in faces[i]}
        for f in rec.get("faces") or []:
            x0, y0, x1, y1 = f["bbox"]
            yaw = head_pose(kps[f["track_id"]])[0] if f.get("track_id") in kps else float("nan")
            reasons = list(f.get("reasons") or [])
            if f.get("skip_reason"):
                outcome, why = "refused", [refusal_category(f["skip_reason"])]
            elif reasons and i not in reverted:
                outcome, why = "bridged", sorted({category(r) for r in reasons})
            elif reasons:
                outcome, why = "qa_failed", sorted({category(r) for r in reasons})
            elif i in reverted:
                outcome, why = "reverted", []
            else:
                outcome, why = "delivered", []
            out.append({"frame": i, "track": f.get("track_id"), "box": (x0, y0, x1, y1), "height": float(y1 - y0),
                        "yaw": float(yaw), "outcome": outcome, "why": why,
                        "eligible": bool(y1 - y0 >= MIN_FACE and np.isfinite(yaw) and abs(yaw) <= MAX_YAW)})
    return out


def outcome_shares(ps: list[dict]) -> dict:
    """yield and the refused / QA-failed shares (by reason) over the eligible pairs."""
    el = [p for p in ps if p["eligible"]]
    n = len(el)
    by = Counter(p["outcome"] for p in el)
    refused = Counter(w for p in el if p["outcome"] == "refused" for w in p["why"])
    failed = Counter(w for p in el if p["outcome"] == "qa_failed" for w in p["why"])
    bridged = Counter(w for p in el if p["outcome"] == "bridged" for w in p["why"])

    def share(v):
        return round(v / n, 4) if n else None

    return {"tracked_pairs": len(ps), "eligible_pairs": n,
            "ineligible": {"small": sum(p["height"] < MIN_FACE for p in ps),
                           "turned": sum(p["height"] >= MIN_FACE and not p["eligible"] for p in ps)},
            "yield": share(by["delivered"]), "refused": share(by["refused"]), "qa_failed": share(by["qa_failed"]),
            "reverted_other_face": share(by["reverted"]), "bridged": share(by["bridged"]),
            # a pair fails for every reason it has: these shares may add up to more than qa_failed
            "refused_by_reason": {k: share(v) for k, v in refused.most_common()},
            "qa_failed_by_reason": {k: share(v) for k, v in failed.most_common()},
            # what the bridged pairs failed on: a shot kept swapped over them, so the viewer sees these
            "bridged_by_reason": {k: share(v) for k, v in bridged.most_common()}}


def identity_switches(ps: list[dict], cuts: list[int]) -> int:
    """Frames where a track's delivered state flips inside one shot (between the tracker's cuts)."""
    cuts = sorted(cuts)
    last: dict = {}
    flips = 0
    for p in sorted(ps, key=lambda p: (p["track"], p["frame"])):
        shot = int(np.searchsorted(cuts, p["frame"], side="right"))
        state = p["outcome"] in ("delivered", "bridged")      # the viewer sees the swap
        prev = last.get(p["track"])
        if prev is not None and prev[0] == shot and prev[1] != state:
            flips += 1
        last[p["track"]] = (shot, state)
    return flips


class ClipTruth:
    """What the scorer sees in a clip's input frames (computed once, shared by its runs)."""

    def __init__(self, frames: list[np.ndarray]):
        self.frames = frames
        self.faces = []         # per frame: [(rect, l68)] of every HOG face
        for f in frames:
            self.faces.append([(r, score.landmarks(f, r)) for r in score.hog(f, 1)])
        found = [i for i, fs in enumerate(self.faces) if fs]
        # per frame the boxes to exempt from "off the face" (None: no face near enough to judge)
        self.boxes = []
        for i in range(len(frames)):
            j = min(found, key=lambda k: abs(k - i)) if found else None
            self.boxes.append(None if j is None or abs(j - i) > NEAREST else
                              [qcases.face_box(l68) for _, l68 in self.faces[j]])
        self._emb: dict = {}

    def target(self, i: int, bbox) -> tuple | None:
        """The HOG face of frame i that overlaps the tracked box most (IoU > 0.3), or None."""
        best, best_iou = None, 0.3
        for r, l68 in self.faces[i]:
            v = iou((r.left(), r.top(), r.right(), r.bottom()), bbox)
            if v > best_iou:
                best, best_iou = (r, l68), v
        return best

    def embedding(self, i: int, rect) -> np.ndarray:
        key = (i, rect.left(), rect.top())
        if key not in self._emb:
            self._emb[key] = score.embedding(self.frames[i], rect)
        return self._emb[key]


def iou(a, b) -> float:
    x0, y0, x1, y1 = max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, x1 - x0) * max(0.0, y1 - y0)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _rect_box(r) -> tuple:
    return (r.left(), r.top(), r.right(), r.bottom())


def off_face(truth: ClipTruth, delivered: list[np.ndarray]) -> dict:
    """Frames whose change outside every scorer face box (forehead + 10 %, bench/quality's box)
    exceeds OFF_FACE_SHARE of the largest box; frames with no scorer face near are not judged."""
    bad, unjudged = [], 0
    for i, (a, b) in enumerate(zip(truth.frames, delivered)):
        ch = score.changed(a, b)
        if not ch.any():
            continue
        boxes = truth.boxes[i]
        if boxes is None:
            unjudged += 1
            continue
        for x0, y0, x1, y1 in boxes:
            ch[max(0, int(y0)):max(0, int(np.ceil(y1))), max(0, int(x0)):max(0, int(np.ceil(x1)))] = False
        area = max((x1 - x0) * (y1 - y0) for x0, y0, x1, y1 in boxes)
        if ch.sum() > OFF_FACE_SHARE * max(area, 1.0):
            bad.append(i)
    return {"off_face_frames": len(bad), "off_face_list": bad, "off_face_unjudged": unjudged}


def _grey_around(img: np.ndarray, pts: np.ndarray, pad: int, min_h: int) -> tuple[np.ndarray, tuple] | None:
    """(float grey crop around ``pts`` + ``pad`` px, its top-left corner), None when it is under 8 x ``min_h``."""
    x0, y0 = np.floor(pts.min(0)).astype(int) - pad
    x1, y1 = np.ceil(pts.max(0)).astype(int) + pad + 1
    h, w = img.shape[:2]
    x0, y0, x1, y1 = max(0, x0), max(0, y0), min(w, x1), min(h, y1)
    if x1 - x0 < 8 or y1 - y0 < min_h:
        return None
    return cv2.cvtColor(np.ascontiguousarray(img[y0:y1, x0:x1]), cv2.COLOR_RGB2GRAY).astype(np.float32), (x0, y0)


def face_detail(img: np.ndarray, l68: np.ndarray) -> float | None:
    """Mean absolute Laplacian of the grey image over the inner face (the hull of the 68 points shrunk
    by a tenth of its size): how much fine detail (pores, lashes, lip lines, grain) the face holds."""
    pts = np.asarray(l68, np.float32)
    crop = _grey_around(img, pts, 2, 8)
    if crop is None:
        return None
    grey, corner = crop
    hull = np.zeros(grey.shape, np.uint8)
    cv2.fillConvexPoly(hull, cv2.convexHull(np.rint(pts - corner).astype(np.int32)), 1)
    g = max(1, round(0.1 * np.sqrt(hull.sum())))
    inner = cv2.erode(hull, np.ones((2 * g + 1, 2 * g + 1), np.uint8)) > 0
    if inner.sum() < 16:
        return None
    return float(np.abs(cv2.Laplacian(grey, cv2.CV_32F, ksize=3))[inner].mean())


def forehead_step(img: np.ndarray, l68: np.ndarray) -> float | None:
    """The sharpest brightness step on the forehead: the 98th percentile of the grey image's gradient
    (smoothed over 1 % of the face size, so grain and pores do not count) in the band from just above
    the brows up by a quarter of the brow-to-chin height, between the brows' peaks. Smooth skin
    reads low; a paste whose forehead is a patchwork (a lighter patch of the target's skin where the
    source's hair was cut out, a hard line across it) reads high. Hair across the forehead reads high
    on the input as well, which is why the scorer reports the delivered face's over the input's."""
    pts = np.asarray(l68, np.float32)
    brows = pts[19:25]          # from one brow's peak to the other's: the hair at the temples stays out
    chin = pts[8]
    up = pts[17:27].mean(0) - chin
    height = float(np.linalg.norm(up))
    if height < 16:
        return None
    up /= height
    side = np.array([-up[1], up[0]], np.float32)
    lo = brows + up * 0.06 * height
    hi = brows + up * 0.25 * height
    poly = np.concatenate([lo[np.argsort(lo @ side)], hi[np.argsort(-(hi @ side))]])
    crop = _grey_around(img, poly, 3, 4)
    if crop is None:
        return None
    grey, corner = crop
    grey = cv2.GaussianBlur(grey, (0, 0), max(0.7, 0.01 * height))
    band = np.zeros(grey.shape, np.uint8)
    cv2.fillPoly(band, [np.rint(poly - corner).astype(np.int32)], 1)
    if band.sum() < 16:
        return None
    mag = np.hypot(cv2.Sobel(grey, cv2.CV_32F, 1, 0, ksize=3), cv2.Sobel(grey, cv2.CV_32F, 0, 1, ksize=3)) / 8.0
    return float(np.percentile(mag[band > 0], 98))


FOREHEAD_FLOOR = 1.0   # grey levels per pixel: an input forehead smoother than this counts as this smooth


def mouth_span(openings: list[float]) -> float | None:
    """How far the target's mouth opening moves: its 10th to 90th percentile (``MOUTH_MOVES``)."""
    return float(np.percentile(openings, 90) - np.percentile(openings, 10)) if openings else None


def scored(truth: ClipTruth, delivered: list[np.ndarray], ps: list[dict], source_emb) -> dict:
    """Mouth-opening correlation and identity on the frames whose tracked face was delivered swapped
    (kept frames would score the target against itself), matched to the scorer's face there."""
    t_open, r_open, dists, detail, step = [], [], [], [], []
    for p in ps:
        if p["outcome"] != "delivered":
            continue
        i = p["frame"]
        tgt = truth.target(i, p["box"])
        if tgt is None:
            continue
        rt, lt = tgt
        outs = [(r, iou(_rect_box(r), _rect_box(rt))) for r in score.hog(delivered[i], 1)]
        outs = [(r, v) for r, v in outs if v > 0.3]
        if not outs:
            continue
        ro = max(outs, key=lambda t: t[1])[0]
        lo = score.landmarks(delivered[i], ro)
        t_open.append(score.mouth_open(lt))
        r_open.append(score.mouth_open(lo))
        dt, dr = face_detail(truth.frames[i], lt), face_detail(delivered[i], lt)
        if dt and dr is not None:
            detail.append(dr / dt)
        ft, fr = forehead_step(truth.frames[i], lt), forehead_step(delivered[i], lt)
        if ft is not None and fr is not None:
            step.append(fr / max(ft, FOREHEAD_FLOOR))
        if source_emb is not None and score.yaw_ratio(lt) < FRONTAL:
            e, et = score.embedding(delivered[i], ro), truth.embedding(i, rt)
            dists.append((float(np.linalg.norm(e - source_emb)), float(np.linalg.norm(e - et)),
                          float(np.linalg.norm(et - source_emb))))
    d = np.asarray(dists) if dists else None
    span = mouth_span(t_open)
    moving = span is not None and span >= MOUTH_MOVES
    return {"mouth_open_corr": score.pearson(t_open, r_open), "mouth_frames": len(t_open),
            # a correlation on a mouth that hardly moves is noise: such runs are left out of the median
            "target_mouth_range": round(max(t_open) - min(t_open), 3) if t_open else None,
            "target_mouth_span": round(span, 3) if span is not None else None, "mouth_moves": moving,
            "frontal_frames": len(dists),
            # fine detail of the delivered face over the input's, same place (1: as sharp; a small
            # source's upscaled face smears pores, lashes and grain: the "mask-like" look)
            "detail_ratio": round(float(np.median(detail)), 3) if detail else None,
            # the sharpest step on the delivered forehead over the input's (1: as smooth; a patchwork
            # forehead, e.g. the target's lit skin showing where the source's hair was cut, reads > 1)
            "forehead_step": round(float(np.median(step)), 3) if step else None,
            "toward_source": float(np.mean(d[:, 0] < d[:, 2])) if d is not None else None,
            "moved_to_source": float(np.mean(d[:, 0] < d[:, 1])) if d is not None else None,
            "identity_distances": [round(float(v), 3) for v in np.median(d, axis=0)] if d is not None else None}


def source_embedding(rgb: np.ndarray):
    for up in (1, 2):
        rects = score.hog(rgb, up)
        if rects:
            return score.embedding(rgb, max(rects, key=lambda r: r.width() * r.height()))
    return None
