"""QA gate: does the swapped clip show the source identity, keep the target's expression, and look
right to a viewer?

Per swapped face, identity measurements against the same recognizer that built the source model
(embeddings of different recognizers are not comparable):

- identity: cosine similarity of the re-detected swapped face to the source face model;
- leakage: cosine similarity of the swapped face to the *original* face of the same frame. A good
  swap moves away from the target; "nothing changed" gives ~1;
- landmark drift: how far the five keypoints moved, in inter-ocular distances. The swap must keep
  pose and expression, so the swapped face's keypoints should sit where the original's do;
- flicker ratio: frame-to-frame change inside the face box, output over input. Talking faces
  move, so absolute change says little; the ratio says whether the swap *adds* change.

and what a viewer sees: expression (``metrics_expression``: mouth opening and movement against the target's),
occluder overwrite, colour cast, seam, bleed, off-face paste and coverage (``metrics_image``).
Thresholds, reasons, the decision and the policies live in ``decide``.

It streams: originals and swapped frames are read chunk by chunk in lockstep, analyzer calls are
batched per chunk, and only small per-frame records are kept, so memory does not grow with the
clip beyond those records. Clip-wide steps (the expression window, reasons) run on those records
at the end (:func:`finalize`), so a resumed run reports exactly what an uninterrupted one does.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import cv2
import numpy as np

from ..errors import SwaplineError
from ..faces import source_check
from ..metrics import observe_qa
from ..parallel import map_frames, read_ahead
from ..types import Face, FaceSet, SourceIdentity
from ..video.store import ChunkStore, faces_key, model_stamp, stage_key
from .decide import (  # noqa: F401
    DEFAULT_POLICY,
    FORMAT,
    METRICS,
    POLICIES,
    QAAccumulator,
    QAFailedError,
    QAThresholds,
    apply_policy,
    face_reasons,
    format_frames,
    frame_status,
    merge_chunk,
    thresholds_for,
)
from .decide import r as _r
from .metrics_expression import add_window_correlation, expression_values, mouth_probe, mouth_profile
from .metrics_image import image_metrics
from .redetect import RETRY_WINDOW_SCALE, WINDOW_SCALE, detect_around, match, redetect

# Flicker is a ratio of mean absolute differences (0..255 grey levels). Added to both sides so a
# near-static face (codec noise only, ~0.5 levels) does not turn a tiny absolute change into a
# large ratio.
FLICKER_EPS = 1.0

# Re-detections on the *original* frame must agree closely with the tracked face to serve as its
# reference: MTCNN occasionally returns half a face (frame 4 of the sample clip: IoU 0.45 with the
# tracked box, inter-ocular 27 px instead of 65) and comparing to that would blame the swap.
ORIGINAL_MATCH_IOU = 0.5


def check_recognizer(source: SourceIdentity, analyzer) -> None:
    if source.recognizer != analyzer.recognizer_name:
        raise SwaplineError(
            f"the face model was built with recognizer '{source.recognizer}' but the QA analyzer uses "
            f"'{analyzer.recognizer_name}': embeddings of different recognizers cannot be compared. "
            "Rebuild the face model with the same analyzer, or give QA that analyzer.")


# -- per-chunk evaluation -------------------------------------------------------------------
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


def _landmarks(analyzer, images: Sequence[np.ndarray], faces: Sequence[Sequence[Face]]) -> None:
    """68 points where the embed call did not leave them (the built-in analyzer does)."""
    missing = [[f for f in fs if f.landmarks is None] for fs in faces]
    if any(missing) and getattr(analyzer, "supports_landmarks", hasattr(analyzer, "landmarks68")):
        analyzer.landmarks68(images, missing)


# Long (90 lines) on purpose: batched detect, batched embed and the per-frame records share six per-frame lists.
def evaluate_chunk(analyzer, originals: Sequence[np.ndarray], swapped: Sequence[np.ndarray],
                   faces: Sequence[Sequence[Face]], source: SourceIdentity, prev: tuple | None = None,
                   first_index: int = 0, thresholds: QAThresholds | None = None,
                   sample_every: int = 1, seconds: dict | None = None,
                   occluders: Callable | None = None, cuts: Sequence[int] = (), safety=None) -> list[dict]:
    """One record per frame of the chunk, with the raw per-face metrics (reasons and status are
    filled by :func:`finalize`, which needs the whole clip for the expression window).

    ``faces`` are the tracked target faces (what the swapper was given); ``prev`` is the last
    (original, swapped) frame pair of the previous chunk so flicker is continuous across chunk
    borders. Frames not on the ``sample_every`` grid are "skipped" but still serve as the
    previous frame for flicker. ``seconds`` (optional) accumulates detect/embed time.
    ``occluders(frame_index, original_frame, face)`` (optional) returns the target's occluder mask
    for one face (full frame, bool or 0..1), e.g. from the mask stack; without it the gate uses
    its own estimate (:func:`metrics_image.estimate_occluder`). ``cuts``: clip indices where a new
    shot starts; flicker is not measured across a cut (no previous frame). ``safety`` (optional,
    :class:`safety.SafetyClassifier`) scores every evaluated output frame, faces or not; the
    score goes into the frame's record and never changes its status.
    """
    seconds = seconds if seconds is not None else {}
    check_recognizer(source, analyzer)
    th = thresholds or QAThresholds()
    n = len(swapped)
    if not (len(originals) == n == len(faces)):
        raise ValueError(f"chunk mismatch: {len(originals)} original frames, {n} swapped, {len(faces)} face lists")
    step = max(1, int(sample_every))
    todo = [k for k in range(n) if (first_index + k) % step == 0 and faces[k]]

    # Both versions of every evaluated frame are re-detected, the originals too, so drift compares
    # detector to detector: tracker smoothing does not count as drift, and a swap placed where a
    # lagging tracker (not the face) was does. Only around each tracked face, never the whole frame.
    t0 = time.perf_counter()
    found_orig, found_swap = redetect(analyzer, [originals[k] for k in todo], [swapped[k] for k in todo],
                                       [faces[k] for k in todo], th.match_iou)
    seconds["detect"] = seconds.get("detect", 0.0) + time.perf_counter() - t0
    missed = [j for j, k in enumerate(todo)
              if any(m is None for m in match(faces[k], found_swap[j], th.match_iou))]
    if missed:
        t0 = time.perf_counter()
        again = detect_around(analyzer, [swapped[todo[j]] for j in missed], [faces[todo[j]] for j in missed],
                               [(RETRY_WINDOW_SCALE, False), (WINDOW_SCALE, True)])
        for j, extra in zip(missed, again):
            found_swap[j] = found_swap[j] + extra
        seconds["detect"] = seconds.get("detect", 0.0) + time.perf_counter() - t0

    orig_faces: list[list[Face]] = []
    swap_faces: list[list[Face]] = []
    redetected: list[list[bool]] = []
    orig_found: list[list[bool]] = []
    for j, k in enumerate(todo):
        tracked = faces[k]
        m_orig = match(tracked, found_orig[j], ORIGINAL_MATCH_IOU)
        m_swap = match(tracked, found_swap[j], th.match_iou)
        # Without a detection, embed at the tracked geometry: identity/leakage still get a value
        # (useful in the report) while the frame fails on redetection.
        orig_faces.append([_fresh(o if o is not None else t) for o, t in zip(m_orig, tracked)])
        swap_faces.append([_fresh(s if s is not None else t) for s, t in zip(m_swap, tracked)])
        redetected.append([s is not None for s in m_swap])
        orig_found.append([o is not None for o in m_orig])
    t0 = time.perf_counter()
    if todo:
        imgs = [originals[k] for k in todo] + [swapped[k] for k in todo]
        analyzer.embed(imgs, orig_faces + swap_faces)
        _landmarks(analyzer, imgs, orig_faces + swap_faces)
    # The result's mouth is read on the target's geometry and face: a probe image per face (the
    # target frame with the result's lower face in it, metrics_expression.mouth_probe) fitted from
    # the target's keypoints, so what the swap did to the eyes and nose does not move the mouth.
    expr_faces: list[list[Face]] = []
    if todo and getattr(analyzer, "supports_landmarks", hasattr(analyzer, "landmarks68")):
        probes, probe_faces = [], []
        for j, k in enumerate(todo):
            row = []
            for o in orig_faces[j]:
                e = o.copy(landmarks=None, embedding=None)
                row.append(e)
                if o.landmarks is not None:
                    probes.append(mouth_probe(originals[k], swapped[k], o.landmarks))
                    probe_faces.append([e])
            expr_faces.append(row)
        if probes:
            analyzer.landmarks68(probes, probe_faces)
    else:
        expr_faces = [[o.copy(landmarks=None) for o in fs] for fs in orig_faces]
    seconds["embed"] = seconds.get("embed", 0.0) + time.perf_counter() - t0
    scores: dict[int, float] = {}
    if safety is not None:
        t0 = time.perf_counter()
        on_grid = [k for k in range(n) if (first_index + k) % step == 0]
        scores = dict(zip(on_grid, safety.score([swapped[k] for k in on_grid]))) if on_grid else {}
        seconds["safety"] = seconds.get("safety", 0.0) + time.perf_counter() - t0

    t0 = time.perf_counter()
    # The pixel metrics of every face, on threads; the occluder callable runs here, in order
    # (it may hold a model).
    jobs = [(originals[k], swapped[k], o.landmarks,
             occluders(first_index + k, originals[k], t) if occluders is not None else None)
            for j, k in enumerate(todo) for t, o in zip(faces[k], orig_faces[j]) if o.landmarks is not None]
    pixels = iter(map_frames(_face_pixels, jobs))
    records: list[dict] = []
    j = 0
    for k in range(n):
        index = first_index + k
        if index % step != 0:
            records.append({"frame": index, "status": "skipped", "faces": []})
            continue
        if not faces[k]:
            records.append({"frame": index, "status": "no_face", "faces": [], **_safety(scores, k)})
            continue
        if index in cuts:
            prev_o, prev_s = None, None
        elif k > 0:
            prev_o, prev_s = originals[k - 1], swapped[k - 1]
        else:
            prev_o, prev_s = prev if prev is not None else (None, None)
        face_records = []
        for t, o, s, red, ofound, e in zip(faces[k], orig_faces[j], swap_faces[j], redetected[j], orig_found[j],
                                           expr_faces[j]):
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
            img, prof_t, prof_r = next(pixels) if o.landmarks is not None else ({}, None, None)
            result_lm = e.landmarks if e.landmarks is not None else s.landmarks
            # the result's mouth is read twice: on the probe and on the result frame itself (the
            # less open of the two counts, see metrics_expression.expression_values)
            expr = expression_values(o.landmarks, result_lm if red else None,
                                     s.landmarks if red and e.landmarks is not None else None)
            changed = img.get("changed")
            face_records.append({
                "track_id": t.track_id, "bbox": [round(float(v), 1) for v in t.bbox],
                "swapped": True, "changed": _r(changed),     # "swapped" is decided in finalize
                "identity": _r(identity), "leakage": _r(leakage), "landmark_drift": _r(drift),
                "flicker_ratio": _r(flicker), "redetected": bool(red),
                # False: the original's re-detection missed, drift/leakage use the tracked face
                "original_redetected": bool(ofound),
                **{key: _r(v) for key, v in expr.items()}, "expression_corr": None,   # see finalize
                "mouth_profile_target": prof_t, "mouth_profile_result": prof_r,
                **{key: _r(img.get(key)) for key in IMAGE_KEYS},
                "occluder_source": img.get("occluder_source"), "reasons": []})
        records.append({"frame": index, "status": "ok", "faces": face_records, **_safety(scores, k)})
        j += 1
    seconds["pixels"] = seconds.get("pixels", 0.0) + time.perf_counter() - t0
    return records


def _face_pixels(job: tuple) -> tuple[dict, object, object]:
    """Image metrics and the mouth profiles of one face. The profiles are the expression window's
    reading (metrics_expression.add_window_correlation): the mouth region of both frames at the
    target's landmarks; the result's own fit and re-detection play no part."""
    original, result, landmarks, occ = job
    return (image_metrics(original, result, landmarks, occ),
            mouth_profile(original, landmarks), mouth_profile(result, landmarks))


def _safety(scores: dict, k: int) -> dict:
    return {"safety": _r(scores[k])} if k in scores else {}


IMAGE_KEYS = ("occluder_overwrite", "occluder_share", "colour_cast", "seam_ratio", "bleed", "offface",
              "detail_ratio", "blotch", "chroma_blotch", "edge_loss", "feature_contrast", "texture_excess")


def finalize(records: list[dict], th: QAThresholds, skipped: dict | None = None,
             source_warned: bool = False) -> list[dict]:
    """Clip-wide steps on the raw records (in place): expression window, reasons, frame status.

    ``skipped`` = {frame: {track_id: reason}} from the swap stage: an unswapped face the swapper
    refused on purpose is left untouched, which is safe, so it is counted (coverage) but does not
    fail its frame. ``source_warned``: Build Face Model's source check warned about the face
    model's photo (``th.fail_on_source_warning`` then fails every swapped face).
    """
    add_window_correlation(records, th.expression_window)
    for rec in records:
        if rec["status"] in ("skipped", "no_face"):
            continue
        for f in rec["faces"]:
            # A face whose hull the result hardly changed was not swapped: its quality metrics
            # would judge the target itself, so only coverage counts it.
            f["swapped"] = bool(f.get("changed") is None or f["changed"] >= th.min_changed)
            why = (skipped or {}).get(rec["frame"], {}).get(f.get("track_id"))
            if not f.get("swapped") and why:
                f["skip_reason"] = why
                f["reasons"] = []
            else:
                f["reasons"] = face_reasons(th, f, source_warned)
        rec["status"] = frame_status(rec["faces"])
    return records


def evaluate_frames(analyzer, originals: Sequence[np.ndarray], swapped: Sequence[np.ndarray],
                    faces: Sequence[Sequence[Face]], source: SourceIdentity,
                    thresholds: QAThresholds | None = None, occluders: Callable | None = None,
                    skipped: dict | None = None, safety=None) -> dict:
    """The full report for frames held in memory (still images, calibration, tests)."""
    th = thresholds or QAThresholds()
    acc = QAAccumulator()
    acc.add(finalize(evaluate_chunk(analyzer, originals, swapped, faces, source, None, 0, th,
                                    occluders=occluders, safety=safety), th, skipped,
                     bool(source_check.warnings_of(source))))
    return acc.report(th, skipped=skipped, safety_model=safety.describe() if safety is not None else None)


def _chunk_pairs(seq_original, seq_swapped, first: int):
    """((c, original frames), (c, swapped frames)) from chunk ``first`` on."""
    if first >= seq_swapped.n_chunks:
        return iter(())
    if seq_original.key == seq_swapped.original().key:
        # the usual case (the original is the swapped sequence without its layers): one decode
        return (((c, orig), (c, swp)) for c, orig, swp in seq_swapped.iter_chunk_pairs(first))
    return zip(seq_original.iter_chunks(first), seq_swapped.iter_chunks(first))


@observe_qa
def run_qa(seq_original, seq_swapped, faces: FaceSet, source: SourceIdentity, analyzer,
           thresholds: QAThresholds | None = None, hooks=None, sample_every: int = 1,
           models: list[dict] | None = None, store_root: str | None = None,
           occluders: Callable | None = None, skipped: dict | None = None, safety=None) -> dict:
    """Stream both sequences chunk by chunk and return the full QA report.

    ``seq_original`` is usually ``dataclasses.replace(seq_swapped, layers=())``. With
    ``store_root``, each chunk's raw records are stored as they are made, so a re-run after an
    interrupt or a crash evaluates only the chunks not done yet and reports the same (the
    clip-wide steps run on the records afterwards, see :func:`finalize`). ``occluders`` and
    ``skipped``: see :func:`evaluate_chunk` and :func:`finalize`; an ``occluders`` callable
    should carry a ``key`` attribute (what its masks depend on) for the resume key. ``safety``:
    the content-safety classifier (:mod:`.safety`), or None.
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
                        model_stamp(analyzer), getattr(analyzer, "supports_refine", False), th.to_json(), step,
                        None if occluders is None else getattr(occluders, "key", repr(occluders)),
                        None if safety is None else safety.key)
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
    # the next chunk is decoded while this one is evaluated: "decode" counts only the wait for it
    for (c, orig), (c2, swp) in read_ahead(_chunk_pairs(seq_original, seq_swapped, first),
                                           enabled=seq_swapped.reads_ahead(views=2)):
        seconds["decode"] += time.perf_counter() - t_dec
        if hooks is not None:
            hooks.check_interrupt()
        if c != c2 or len(orig) != len(swp):
            raise ValueError(f"chunk {c}: {len(orig)} original frames but {len(swp)} swapped")
        rng = seq_swapped.chunk_range(c)
        records = evaluate_chunk(analyzer, orig, swp, [faces.frames[i].faces for i in rng], source,
                                 prev, rng.start, th, sample_every, seconds, occluders,
                                 cuts=frozenset(getattr(faces, "cuts", ())), safety=safety)
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
    if safety is not None:
        models = [*models, {"role": "content_safety", **safety.describe()}]
    finalize(acc.records, th, skipped, bool(source_check.warnings_of(source)))
    rep = acc.report(th, models, skipped, safety.describe() if safety is not None else None)
    rep["sample_every"] = step
    rep["cuts"] = sorted(int(c) for c in getattr(faces, "cuts", ()))
    rep["seconds"] = {k: round(v, 3) for k, v in seconds.items()}
    rep["chunks_resumed"] = resumed
    return rep


