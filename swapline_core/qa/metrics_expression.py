"""Expression consistency: does the result open its mouth (and eyes) when the target does?

A swap must keep the target's expression. Per frame, mouth opening (inner-lip gap over jaw
width, from 68-point landmarks) of the re-detected result is compared with the target's; over a
sliding window of frames, the two openings must also move together (Pearson correlation). A
mouth frozen to the source, or replaced by one that does not follow speech, keeps a near-constant
opening while the target's moves: the per-frame gap grows and the correlation drops to ~0.

The result's landmarks are fitted on a probe (:func:`mouth_probe`): the target frame with only
the result's lower face in it, placed by the target's keypoints, so the swapped eyes and nose do
not move the fitted mouth; and on the result frame itself. The less open reading counts
(:func:`expression_values` says why).

The window is computed from the per-frame records after every chunk is evaluated, so it does
not depend on chunk boundaries and a resumed run gives the same numbers as an uninterrupted one.
"""
from __future__ import annotations

from collections import defaultdict

import cv2
import numpy as np

# dlib 68-point indices: inner upper lip 61-63 face inner lower lip 67-65.
_INNER_PAIRS = ((61, 67), (62, 66), (63, 65))
_EYE_PAIRS = (((37, 41), (38, 40), (36, 39)), ((43, 47), (44, 46), (42, 45)))
# The target must actually move its mouth inside the window for a correlation to mean anything
# (a closed, silent mouth has nothing to follow): std of its opening, in jaw widths.
MIN_TARGET_STD = 0.01
MIN_WINDOW_FRAMES = 5
# The lower face (under the nose, between the jaw corners, down to the chin) in 68-point indices,
# grown by LOWER_FACE_GROW face sizes: the region the result's mouth is read from (mouth_probe).
LOWER_FACE = [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 35, 34, 33, 32, 31]
LOWER_FACE_GROW = 0.06


def mouth_probe(original: np.ndarray, result: np.ndarray, target_lm: np.ndarray) -> np.ndarray:
    """The target frame with the result's lower face in it: what the result's mouth is measured on.

    dlib's 68-point fit is one cascade over the whole face: change the eyes and nose and the
    mouth points move too. On the sample clip a result whose whole lower face was the target's
    own (mouth pixels identical) read 0.03 jaw widths less open than the target with the swapped
    upper face around it, and its opening correlated negatively with the target's. With the
    target's upper face around the result's mouth, the fit sees only what the swap did to the
    mouth: identical pixels give identical points, a frozen or replaced mouth moves them.
    """
    lm = np.asarray(target_lm, np.float32)
    mask = np.zeros(original.shape[:2], np.uint8)
    cv2.fillConvexPoly(mask, cv2.convexHull(np.round(lm[LOWER_FACE]).astype(np.int32)), 1)
    size = float(np.sqrt(max(cv2.contourArea(cv2.convexHull(lm)), 1.0)))
    g = max(1, round(LOWER_FACE_GROW * size))
    mask = cv2.dilate(mask, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * g + 1, 2 * g + 1))).astype(bool)
    out = original.copy()
    out[mask] = result[mask]
    return out


def _jaw(lm: np.ndarray) -> float:
    # Jaw width does not change when the mouth opens (the face height does).
    return max(float(np.linalg.norm(lm[16] - lm[0])), 1e-6)


def mouth_open(lm: np.ndarray) -> float:
    lm = np.asarray(lm, np.float64)
    return float(np.mean([np.linalg.norm(lm[a] - lm[b]) for a, b in _INNER_PAIRS]) / _jaw(lm))


def eye_open(lm: np.ndarray) -> float:
    """Mean eye aspect ratio of both eyes (lid gap over eye width)."""
    lm = np.asarray(lm, np.float64)
    vals = []
    for (p1, p2, (c0, c1)) in _EYE_PAIRS:
        width = max(float(np.linalg.norm(lm[c1] - lm[c0])), 1e-6)
        vals.append((np.linalg.norm(lm[p1[0]] - lm[p1[1]]) + np.linalg.norm(lm[p2[0]] - lm[p2[1]])) / (2 * width))
    return float(np.mean(vals))


def expression_values(target_lm: np.ndarray | None, result_lm: np.ndarray | None,
                      result_frame_lm: np.ndarray | None = None) -> dict:
    """Per-frame values for one face (None where landmarks are missing).

    ``result_lm``: the result's landmarks fitted on the probe (:func:`mouth_probe`);
    ``result_frame_lm`` (optional): fitted on the result frame itself. The result's mouth opening
    is the smaller of the two readings. dlib's 68-point cascade, given a face mixed from two
    people, errs towards an open mouth: its shape prior puts the lower lip where the rest of the
    face says the mouth should be. Measured on the demo output of issue 14 (the source's closed
    mouth, pasted a lip-height above the target's open one): the probe read it 0.02-0.10 jaw
    widths open, the result frame 0.002-0.008 (a viewer sees it closed), so the probe alone let
    the replaced mouth pass. The other way round, on a result that kept the target's lower face
    under a swapped upper face, the frame's fit is the mixed one and the probe reads the mouth
    right. Taking the less open reading keeps the correct one in both; a mouth that is really
    open is read open by both fits.
    """
    if target_lm is None or result_lm is None:
        return {"mouth_target": None, "mouth_result": None, "mouth_delta": None, "eye_delta": None}
    mt, mr = mouth_open(target_lm), mouth_open(result_lm)
    if result_frame_lm is not None:
        mr = min(mr, mouth_open(result_frame_lm))
    return {"mouth_target": mt, "mouth_result": mr, "mouth_delta": abs(mr - mt),
            "eye_delta": abs(eye_open(result_lm) - eye_open(target_lm))}


def window_correlation(target: np.ndarray, result: np.ndarray) -> float | None:
    t, r = np.asarray(target, np.float64), np.asarray(result, np.float64)
    if len(t) < MIN_WINDOW_FRAMES or t.std() < MIN_TARGET_STD:
        return None
    if r.std() < 1e-9:          # frozen: nothing follows the target
        return 0.0
    return float(np.corrcoef(t, r)[0, 1])


def add_window_correlation(records: list[dict], window: int) -> None:
    """Fill ``expression_corr`` on every face record that has mouth values, per track, over the
    ``window`` evaluated frames centred on it (in place)."""
    tracks: dict = defaultdict(list)
    for rec in records:
        for f in rec.get("faces", []):
            if f.get("mouth_target") is not None and f.get("mouth_result") is not None:
                tracks[f.get("track_id")].append(f)
    half = max(1, int(window)) // 2
    for faces in tracks.values():
        t = np.array([f["mouth_target"] for f in faces])
        r = np.array([f["mouth_result"] for f in faces])
        for i, f in enumerate(faces):
            lo, hi = max(0, i - half), min(len(faces), i + half + 1)
            c = window_correlation(t[lo:hi], r[lo:hi])
            f["expression_corr"] = None if c is None else round(c, 4)
