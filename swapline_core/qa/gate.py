"""QA gate: does the swapped clip show the source identity, keep the target's expression, and not flicker?

Four measurements per swapped face, all against the same recognizer that built the source model
(embeddings of different recognizers are not comparable):

- identity: cosine similarity of the re-detected swapped face to the source face model;
- leakage: cosine similarity of the swapped face to the *original* face of the same frame. A good
  swap moves away from the target; "nothing changed" gives ~1;
- landmark drift: how far the five keypoints moved, in inter-ocular distances. The swap must keep
  pose and expression, so the swapped face's keypoints should sit where the original's do;
- flicker ratio: frame-to-frame change inside the face box, output over input. Talking faces
  move, so absolute change says little; the ratio says whether the swap *adds* change.

It streams: originals and swapped frames are read chunk by chunk in lockstep, analyzer calls are
batched per chunk, and only small per-frame records are kept, so memory does not grow with the
clip beyond those records.
"""
from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace

import cv2
import numpy as np

from ..errors import SwaplineError
from ..faces.tracking import iou
from ..types import Face, FaceSet, SourceIdentity
from ..video.store import ChunkStore, faces_key, model_stamp, stage_key

FORMAT = "swapline.qa.v1"
POLICIES = ("flag only", "keep original", "fail job")
METRICS = ("identity", "leakage", "landmark_drift", "flicker_ratio")

# Flicker is a ratio of mean absolute differences (0..255 grey levels). Added to both sides so a
# near-static face (codec noise only, ~0.5 levels) does not turn a tiny absolute change into a
# large ratio.
FLICKER_EPS = 1.0

# Re-detections on the *original* frame must agree closely with the tracked face to serve as its
# reference: MTCNN occasionally returns half a face (frame 4 of the sample clip: IoU 0.45 with the
# tracked box, inter-ocular 27 px instead of 65) and comparing to that would blame the swap.
ORIGINAL_MATCH_IOU = 0.5


@dataclass(frozen=True)
class QAThresholds:
    """Per-face limits; a frame fails when any of its faces breaks any limit.

    Measured with the built-in analyzer (MTCNN + dlib ResNet, recognizer ``dlib_resnet_v1``) on
    ``assets/samples/kling_avatar_clip.mp4`` (48 frames, one face, tracked in "largest" mode)
    swapped to ``assets/samples/source_face.png``, every frame evaluated:

    ====================  ============================  ==========================  =========
    metric                classical swap (default)      known-bad versions          default
    ====================  ============================  ==========================  =========
    identity              median 0.902, p5 0.894,       unswapped 0.835-0.874,      0.85 min
                          min 0.891                     noise 0.846-0.878,
                                                        blur 0.869-0.898
    leakage               median 0.832, p95 0.855,      unswapped: 47 frames 1.000, 0.92 max
                          max 0.866                     one 0.921
    landmark drift        median 0.126, p95 0.149,      (not re-detected)           0.25 max
                          max 0.166
    flicker ratio         median 1.31, p95 2.20,        noise: median 6.2,          3.5 max
                          max 2.73                      min 3.1
    re-detected           48/48                         noise 0/48, blur 1/48       required
    ====================  ============================  ==========================  =========

    The defaults sit outside everything the classical swap produced (identity 0.04 below its
    minimum, leakage 0.05 above its maximum, drift 1.5x and flicker 1.3x its maximum), leaving
    room for clip-to-clip variation (one clip is all that was measured), and still catch the
    failure modes: no change (leakage), a destroyed face (re-detection, flicker). The classical swap's drift is mostly the nose point
    (~0.3 inter-ocular): the source's nose texture, warped onto the target's landmarks, reads as
    a turned nose to MTCNN.

    dlib's similarity scale is compressed: the unswapped avatar already scores 0.85 against the
    source and a noise patch 0.86, so identity alone barely separates a swap from none here;
    leakage and re-detection carry those cases. Other recognizers (InsightFace ArcFace) use
    a different scale: measure again before reusing these numbers with them.
    """
    min_identity: float = 0.85
    max_leakage: float = 0.92
    max_landmark_drift: float = 0.25
    max_flicker_ratio: float = 3.5
    require_redetection: bool = True
    max_fail_fraction: float = 0.0   # decision "fail" when failing/evaluated frames exceed this
    match_iou: float = 0.3           # a re-detected face belongs to a tracked face above this IoU

    def to_json(self) -> dict:
        return asdict(self)


class QAFailedError(SwaplineError):
    def __init__(self, failing: Sequence[int], summary: dict):
        self.failing = list(failing)
        super().__init__(
            f"QA failed on {len(self.failing)} of {summary.get('evaluated', '?')} evaluated frames: "
            f"{format_frames(self.failing)}. Inspect the QA report, lower the thresholds, or set the "
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


def check_recognizer(source: SourceIdentity, analyzer) -> None:
    if source.recognizer != analyzer.recognizer_name:
        raise SwaplineError(
            f"the face model was built with recognizer '{source.recognizer}' but the QA analyzer uses "
            f"'{analyzer.recognizer_name}': embeddings of different recognizers cannot be compared. "
            "Rebuild the face model with the same analyzer, or give QA that analyzer.")


# -- per-chunk evaluation -------------------------------------------------------------------
def _match(tracked: Sequence[Face], found: Sequence[Face], min_iou: float) -> list[Face | None]:
    """Greedy best-IoU assignment; each detection is used at most once."""
    pairs = sorted(((iou(t.bbox, f.bbox), i, j) for i, t in enumerate(tracked) for j, f in enumerate(found)),
                   reverse=True)
    out: list[Face | None] = [None] * len(tracked)
    used: set[int] = set()
    for v, i, j in pairs:
        if v < min_iou or out[i] is not None or j in used:
            continue
        out[i] = found[j]
        used.add(j)
    return out


DETECT_WINDOW = 320        # px: the window around a tracked face that QA re-detects in
WINDOW_SCALE = 2.5         # window side, in face sizes (room for tracker lag and pose)


def _detect_around(analyzer, images: Sequence[np.ndarray], tracked: Sequence[Sequence[Face]]) -> list[list[Face]]:
    """Detections near each tracked face, in frame coordinates, from same-size windows (one batch)."""
    import cv2

    windows, owners = [], []
    for i, (img, fs) in enumerate(zip(images, tracked)):
        h, w = img.shape[:2]
        for f in fs:
            cx, cy = (f.bbox[0] + f.bbox[2]) / 2, (f.bbox[1] + f.bbox[3]) / 2
            side = max(float(f.bbox[2] - f.bbox[0]), float(f.bbox[3] - f.bbox[1]), 8.0) * WINDOW_SCALE
            x0, y0 = int(max(cx - side / 2, 0)), int(max(cy - side / 2, 0))
            x1, y1 = int(min(cx + side / 2, w)), int(min(cy + side / 2, h))
            if x1 - x0 < 8 or y1 - y0 < 8:
                continue
            scale = DETECT_WINDOW / max(x1 - x0, y1 - y0)
            crop = cv2.resize(img[y0:y1, x0:x1], (max(1, round((x1 - x0) * scale)), max(1, round((y1 - y0) * scale))),
                              interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR)
            canvas = np.zeros((DETECT_WINDOW, DETECT_WINDOW, 3), np.uint8)  # same size: one batch
            canvas[:crop.shape[0], :crop.shape[1]] = crop
            windows.append(canvas)
            owners.append((i, x0, y0, scale))
    out: list[list[Face]] = [[] for _ in images]
    for (i, x0, y0, scale), found in zip(owners, analyzer.detect(windows) if windows else []):
        for f in found:
            out[i].append(f.copy(bbox=(f.bbox / scale + np.array([x0, y0, x0, y0], np.float32)).astype(np.float32),
                                 kps=(f.kps / scale + np.array([x0, y0], np.float32)).astype(np.float32)))
    return out


def _box_diff(a: np.ndarray, b: np.ndarray, box: np.ndarray) -> float:
    h, w = a.shape[:2]
    x0, y0 = max(0, int(np.floor(box[0]))), max(0, int(np.floor(box[1])))
    x1, y1 = min(w, int(np.ceil(box[2]))), min(h, int(np.ceil(box[3])))
    if x1 <= x0 or y1 <= y0 or a.shape != b.shape:
        return float("nan")
    ga = cv2.cvtColor(a[y0:y1, x0:x1], cv2.COLOR_RGB2GRAY).astype(np.float32)
    gb = cv2.cvtColor(b[y0:y1, x0:x1], cv2.COLOR_RGB2GRAY).astype(np.float32)
    return float(np.abs(ga - gb).mean())


def _fresh(face: Face) -> Face:
    # Analyzer calls fill embedding/landmarks in place: never touch the FaceSet's own faces.
    return face.copy(embedding=None, landmarks=None, bbox=face.bbox.copy(), kps=face.kps.copy())


def _r(v: float | None, nd: int = 4) -> float | None:
    return None if v is None or not np.isfinite(v) else round(float(v), nd)


def _reasons(th: QAThresholds, redetected: bool, identity, leakage, drift, flicker) -> list[str]:
    out = []
    if th.require_redetection and not redetected:
        out.append("swapped face not re-detected")
    if identity is None or identity < th.min_identity:
        out.append(f"identity {_r(identity, 3)} < {th.min_identity:g}")
    if leakage is not None and leakage > th.max_leakage:
        out.append(f"leakage {leakage:.3f} > {th.max_leakage:g}")
    if drift is not None and drift > th.max_landmark_drift:
        out.append(f"landmark drift {drift:.3f} > {th.max_landmark_drift:g}")
    if flicker is not None and np.isfinite(flicker) and flicker > th.max_flicker_ratio:
        out.append(f"flicker ratio {flicker:.2f} > {th.max_flicker_ratio:g}")
    return out


# Long (90 lines) on purpose: batched detect, batched embed and the per-frame records share six per-frame lists.
def evaluate_chunk(analyzer, originals: Sequence[np.ndarray], swapped: Sequence[np.ndarray],
                   faces: Sequence[Sequence[Face]], source: SourceIdentity, prev: tuple | None = None,
                   first_index: int = 0, thresholds: QAThresholds | None = None,
                   sample_every: int = 1, seconds: dict | None = None) -> list[dict]:
    """One record per frame of the chunk.

    ``faces`` are the tracked target faces (what the swapper was given); ``prev`` is the last
    (original, swapped) frame pair of the previous chunk so flicker is continuous across chunk
    borders. Frames not on the ``sample_every`` grid are "skipped" but still serve as the
    previous frame for flicker. ``seconds`` (optional) accumulates detect/embed time.
    """
    seconds = seconds if seconds is not None else {}
    check_recognizer(source, analyzer)
    th = thresholds or QAThresholds()
    n = len(swapped)
    if not (len(originals) == n == len(faces)):
        raise ValueError(f"chunk mismatch: {len(originals)} original frames, {n} swapped, {len(faces)} face lists")
    step = max(1, int(sample_every))
    todo = [k for k in range(n) if (first_index + k) % step == 0 and faces[k]]

    # One detect call over both versions of every evaluated frame. The originals are re-detected
    # too, so drift compares detector to detector: tracker smoothing does not count as drift, and
    # a swap placed where a lagging tracker (not the face) was does. Detection runs on a fixed-size
    # window around each tracked face, not the whole frame: a fraction of the pixels, one batch.
    t0 = time.perf_counter()
    found = _detect_around(analyzer, [originals[k] for k in todo] + [swapped[k] for k in todo],
                           [faces[k] for k in todo] * 2) if todo else []
    seconds["detect"] = seconds.get("detect", 0.0) + time.perf_counter() - t0
    found_orig, found_swap = found[:len(todo)], found[len(todo):]

    orig_faces: list[list[Face]] = []
    swap_faces: list[list[Face]] = []
    redetected: list[list[bool]] = []
    orig_found: list[list[bool]] = []
    for j, k in enumerate(todo):
        tracked = faces[k]
        m_orig = _match(tracked, found_orig[j], ORIGINAL_MATCH_IOU)
        m_swap = _match(tracked, found_swap[j], th.match_iou)
        # Without a detection, embed at the tracked geometry: identity/leakage still get a value
        # (useful in the report) while the frame fails on redetection.
        orig_faces.append([_fresh(o if o is not None else t) for o, t in zip(m_orig, tracked)])
        swap_faces.append([_fresh(s if s is not None else t) for s, t in zip(m_swap, tracked)])
        redetected.append([s is not None for s in m_swap])
        orig_found.append([o is not None for o in m_orig])
    t0 = time.perf_counter()
    if todo:
        analyzer.embed([originals[k] for k in todo] + [swapped[k] for k in todo], orig_faces + swap_faces)
    seconds["embed"] = seconds.get("embed", 0.0) + time.perf_counter() - t0

    records: list[dict] = []
    j = 0
    for k in range(n):
        index = first_index + k
        if index % step != 0:
            records.append({"frame": index, "status": "skipped", "faces": []})
            continue
        if not faces[k]:
            records.append({"frame": index, "status": "no_face", "faces": []})
            continue
        if k > 0:
            prev_o, prev_s = originals[k - 1], swapped[k - 1]
        else:
            prev_o, prev_s = prev if prev is not None else (None, None)
        face_records = []
        for t, o, s, red, ofound in zip(faces[k], orig_faces[j], swap_faces[j], redetected[j], orig_found[j]):
            identity = float(np.dot(s.embedding, source.embedding)) if s.embedding is not None else None
            leakage = (float(np.dot(s.embedding, o.embedding))
                       if s.embedding is not None and o.embedding is not None else None)
            drift = None
            if red:
                # Against both the re-detected original and the tracked geometry the swap was made
                # on, keeping the smaller: one detector outlier (a half face) must not fail a frame.
                drift = min(float(np.linalg.norm(s.kps - ref.kps, axis=1).mean() / max(ref.inter_ocular, 1e-6))
                            for ref in (o, t))
            flicker = None
            if prev_o is not None:
                d_out = _box_diff(swapped[k], prev_s, t.bbox)
                d_in = _box_diff(originals[k], prev_o, t.bbox)
                flicker = (d_out + FLICKER_EPS) / (d_in + FLICKER_EPS)
            reasons = _reasons(th, red, identity, leakage, drift, flicker)
            face_records.append({
                "track_id": t.track_id, "bbox": [round(float(v), 1) for v in t.bbox],
                "identity": _r(identity), "leakage": _r(leakage), "landmark_drift": _r(drift),
                "flicker_ratio": _r(flicker), "redetected": bool(red),
                # False: the original's re-detection missed, drift/leakage use the tracked face
                "original_redetected": bool(ofound), "reasons": reasons})
        status = "fail" if any(f["reasons"] for f in face_records) else "ok"
        records.append({"frame": index, "status": status, "faces": face_records})
        j += 1
    return records


# -- accumulation and report ----------------------------------------------------------------
class QAAccumulator:
    """Collects per-frame records; holds only those small dicts and the metric values."""

    def __init__(self) -> None:
        self.records: list[dict] = []
        self.values: dict[str, list[float]] = {m: [] for m in METRICS}

    def add(self, records: Iterable[dict]) -> None:
        for rec in records:
            self.records.append(rec)
            for f in rec["faces"]:
                for m in METRICS:
                    if f.get(m) is not None:
                        self.values[m].append(float(f[m]))

    def failing_frames(self) -> list[int]:
        return [r["frame"] for r in self.records if r["status"] == "fail"]

    def summary(self, max_fail_fraction: float = 0.0) -> dict:
        counts = {s: 0 for s in ("ok", "fail", "no_face", "skipped")}
        for r in self.records:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        evaluated = counts["ok"] + counts["fail"]
        fraction = counts["fail"] / evaluated if evaluated else 0.0
        stats = {}
        for m, vals in self.values.items():
            if vals:
                a = np.asarray(vals, np.float64)
                stats[m] = {"n": len(vals), "mean": _r(a.mean()), "median": _r(np.median(a)),
                            "p5": _r(np.percentile(a, 5)), "p95": _r(np.percentile(a, 95)),
                            "min": _r(a.min()), "max": _r(a.max())}
            else:
                stats[m] = {"n": 0}
        redetected = [f["redetected"] for r in self.records for f in r["faces"]]
        return {"frames": len(self.records), **counts, "evaluated": evaluated,
                "fail_fraction": round(fraction, 4), "failing_frames": self.failing_frames(),
                "redetection_rate": _r(np.mean(redetected)) if redetected else None,
                "metrics": stats,
                "decision": "fail" if counts["fail"] and fraction > max_fail_fraction else "pass"}

    def report(self, thresholds: QAThresholds, models: list[dict] | None = None) -> dict:
        summary = self.summary(thresholds.max_fail_fraction)
        return {"format": FORMAT, "decision": summary["decision"], "summary": summary,
                "thresholds": thresholds.to_json(), "models": list(models or []), "frames": self.records}


def run_qa(seq_original, seq_swapped, faces: FaceSet, source: SourceIdentity, analyzer,
           thresholds: QAThresholds | None = None, hooks=None, sample_every: int = 1,
           models: list[dict] | None = None, store_root: str | None = None) -> dict:
    """Stream both sequences chunk by chunk and return the full QA report.

    ``seq_original`` is usually ``dataclasses.replace(seq_swapped, layers=())``. With
    ``store_root``, each chunk's records are stored as they are made, so a re-run after an
    interrupt or a crash evaluates only the chunks not done yet and reports the same.
    """
    th = thresholds or QAThresholds()
    step = max(1, int(sample_every))
    check_recognizer(source, analyzer)
    if not (seq_original.count == seq_swapped.count == len(faces.frames)):
        raise ValueError(f"QA needs matching inputs: original clip {seq_original.count} frames, swapped "
                         f"{seq_swapped.count}, faces {len(faces.frames)}; connect the same frames everywhere")
    if seq_original.chunk != seq_swapped.chunk and not seq_original.layers:
        # Lockstep zip needs equal chunk boundaries. A plain clip re-chunks for free (it is only a
        # read size); a layered one cannot, its layers are stored per chunk number.
        seq_original = replace(seq_original, chunk=seq_swapped.chunk)
    if seq_original.chunk != seq_swapped.chunk:
        raise ValueError(f"original and swapped sequences are chunked differently ({seq_original.chunk} vs "
                         f"{seq_swapped.chunk}); pass dataclasses.replace(swapped, layers=()) as the original")
    store = None
    if store_root is not None:
        key = stage_key("qa", seq_original.key, seq_swapped.key, faces_key(faces),
                        stage_key(source.embedding.round(5).tolist()), getattr(analyzer, "name", None),
                        model_stamp(analyzer), th.to_json(), step)
        store = ChunkStore(store_root, key, {"stage": "qa"})
    acc = QAAccumulator()
    seconds: dict = {"decode": 0.0}
    first = 0
    while store is not None and first < seq_swapped.n_chunks and store.has(first):
        acc.add(json.loads(store.load(first)["records"].tobytes()))
        if hooks is not None:
            hooks.progress(len(seq_swapped.chunk_range(first)))
        first += 1
    resumed = first
    prev = None
    if 0 < first < seq_swapped.n_chunks:     # flicker of the first new frame needs the frame before it
        prev = (seq_original.read_chunk(first - 1)[-1], seq_swapped.read_chunk(first - 1)[-1])
    t_dec = time.perf_counter()
    todo = (zip(seq_original.iter_chunks(first), seq_swapped.iter_chunks(first))
            if first < seq_swapped.n_chunks else ())
    for (c, orig), (c2, swp) in todo:
        seconds["decode"] += time.perf_counter() - t_dec
        if hooks is not None:
            hooks.check_interrupt()
        if c != c2 or len(orig) != len(swp):
            raise ValueError(f"chunk {c}: {len(orig)} original frames but {len(swp)} swapped")
        rng = seq_swapped.chunk_range(c)
        records = evaluate_chunk(analyzer, orig, swp, [faces.frames[i].faces for i in rng], source,
                                 prev, rng.start, th, sample_every, seconds)
        if store is not None:
            store.save(c, {"records": np.frombuffer(json.dumps(records).encode(), np.uint8)})
        acc.add(records)
        prev = (orig[-1], swp[-1])
        if hooks is not None:
            hooks.progress(len(swp))
        t_dec = time.perf_counter()
    if len(acc.records) != seq_swapped.count:
        raise ValueError(f"QA read {len(acc.records)} frames but the clip has {seq_swapped.count}")
    models = models if models is not None else [
        {"role": "qa_analyzer", "name": getattr(analyzer, "name", "?"), "recognizer": analyzer.recognizer_name}]
    rep = acc.report(th, models)
    rep["sample_every"] = step
    rep["seconds"] = {k: round(v, 3) for k, v in seconds.items()}
    rep["chunks_resumed"] = resumed
    return rep


# -- policy ---------------------------------------------------------------------------------
def apply_policy(policy: str, report: dict) -> set[int]:
    """Frame indices whose output should be replaced by the original frame.

    "flag only": none; "keep original": every failing frame (even when the decision passes under
    ``max_fail_fraction``, a bad frame is still better replaced); "fail job": raise when the
    decision is "fail". Frames are replaced, never dropped, so the frame count always holds.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown QA policy {policy!r}; expected one of {POLICIES}")
    failing = [r["frame"] for r in report["frames"] if r["status"] == "fail"]
    if policy == "keep original":
        return set(failing)
    if policy == "fail job" and report["decision"] == "fail":
        raise QAFailedError(failing, report["summary"])
    return set()


def merge_chunk(first_index: int, originals: Sequence[np.ndarray], swapped: Sequence[np.ndarray],
                keep_original: set[int]) -> list[np.ndarray]:
    """The output chunk under a policy: one frame out per frame in, originals where chosen."""
    if len(originals) != len(swapped):
        raise ValueError(f"{len(originals)} original frames but {len(swapped)} swapped")
    return [o if first_index + k in keep_original else s for k, (o, s) in enumerate(zip(originals, swapped))]
