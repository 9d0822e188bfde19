"""Expression consistency: does the result open its mouth (and eyes) when the target does?

A swap must keep the target's expression. Two readings:

- per frame, mouth opening (inner-lip gap over jaw width, from 68-point landmarks) of the
  re-detected result against the target's (``mouth_delta``);
- over a sliding window of frames, whether the result's mouth *moves with* the target's
  (``expression_corr``): the correlation of the frame-to-frame changes of a mouth profile (the
  brightness of the mouth region, row by row, :func:`mouth_profile`) read from the result and
  from the target at the same place, the target's. A mouth frozen to the source, or replaced by
  one that does not follow speech, changes little or out of step while the target's opens and
  closes: the correlation drops to ~0. A window where the target's mouth barely moves carries no
  evidence and gets no value (None), not a pass.

Why pixels and not the landmarks' opening for the window: dlib's 68-point fit is one cascade over
the whole face, so the result's fitted mouth moves with the swapped eyes and forehead and with the
target's jaw. On the sample clip's ``mouth_frozen_to_source`` (the source's closed mouth pasted over
the target's; out/bench/qa_calibration_records.json of calibration/calibrate_qa.py) the fit read that
closed mouth 0.025-0.134 jaw widths open, the known-good case's range (0.027-0.153), and a
result that was not re-detected had no reading at all: the case was caught on 20 of 48 frames.
Changes far from the mouth moved the landmark reading's known-good worst window 0.40-0.79 and its
calibrated limit 0.33-0.47; the profile's worst window moved 0.993-0.999 and its limit 0.573-0.578
(docs/measurements/qa_expression_stability.md, calibration/qa_expression_stability.py). The profile is
read at the target's landmarks from the result's pixels under the nose only: the forehead and eyes
cannot move it by construction, a whole-face colour or brightness change is normalised out, and
it needs no re-detection of the result.

The result's landmarks for ``mouth_delta`` are fitted on a probe (:func:`mouth_probe`): the
target frame with only the result's lower face in it, placed by the target's keypoints; and on the
result frame itself. The less open reading counts (:func:`expression_values` says why).

The window is computed from the per-frame records after every chunk is evaluated, so it does
not depend on chunk boundaries and a resumed run gives the same numbers as an uninterrupted one.
"""
from __future__ import annotations

from collections import defaultdict

import cv2
import numpy as np

from ..faces.shape import eye_aspect
from .metrics_image import dilate_disc

# dlib 68-point indices: inner upper lip 61-63 face inner lower lip 67-65.
_INNER_PAIRS = ((61, 67), (62, 66), (63, 65))
# The target must actually move its mouth inside the window for a correlation to mean anything
# (a closed, silent mouth has nothing to follow): std of its landmark opening, in jaw widths.
# Below it the window is "no evidence" (None), neither pass nor fail.
MIN_TARGET_STD = 0.01
MIN_WINDOW_FRAMES = 5
# The mouth profile (mouth_profile): a patch around the target's mouth, in inter-ocular distances
# (IOD) along and across the eye line, centred PROFILE_DOWN below the lips' centre (an opening
# mouth moves the lower lip and chin down), PROFILE_ROWS rows; each row is the mean over the
# patch's central half (the inner mouth, not the cheeks). The value channel (max of R, G, B) keeps
# the dark mouth opening and teeth and ignores lip colour: red lips and pale skin are both bright
# in it. On the sample clip the pipeline's real output (paler lips than the target's) correlates
# 0.83-0.93 with it (calibration/calibrate_qa.py records, classical_today); grey levels, tried, rated it
# lower, as if the lip colour change were mouth movement.
PROFILE_WIDTH, PROFILE_HEIGHT, PROFILE_DOWN = 1.3, 1.0, 0.15
PROFILE_ROWS, PROFILE_COLS = 24, 32
_MARGIN = 3        # px around the profile patch's box that bilinear sampling may read
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
    size = float(np.sqrt(max(cv2.contourArea(cv2.convexHull(lm)), 1.0)))
    g = max(1, round(LOWER_FACE_GROW * size))
    hull = cv2.convexHull(np.round(lm[LOWER_FACE]).astype(np.int32))
    # Only the hull's box grown by g (+1) is touched: the same pixels as a whole-frame mask, at
    # the cost of the lower face rather than the frame.
    h, w = original.shape[:2]
    bx, by, bw, bh = cv2.boundingRect(hull)
    x0, y0 = max(0, bx - g - 1), max(0, by - g - 1)
    x1, y1 = min(w, bx + bw + g + 1), min(h, by + bh + g + 1)
    out = original.copy()
    if x1 <= x0 or y1 <= y0:
        return out
    mask = np.zeros((y1 - y0, x1 - x0), np.uint8)
    cv2.fillConvexPoly(mask, hull - np.array([x0, y0], np.int32), 1)
    mask = dilate_disc(mask, g).astype(bool)
    np.copyto(out[y0:y1, x0:x1], result[y0:y1, x0:x1], where=mask[..., None])
    return out


def mouth_profile(image: np.ndarray, target_lm: np.ndarray) -> list[float]:
    """The mouth region's brightness, row by row, at the target's mouth: PROFILE_ROWS values,
    zero mean and unit spread over the patch (so a colour, brightness or contrast change of the
    whole result does not change it). Read with the *target's* landmarks on both the target and
    the result frame: the result is compared where the target's mouth is, its own fit plays no part."""
    lm = np.asarray(target_lm, np.float64)
    eye_l, eye_r = lm[36:42].mean(0), lm[42:48].mean(0)
    iod = max(float(np.linalg.norm(eye_r - eye_l)), 1e-6)
    ux = (eye_r - eye_l) / iod
    uy = np.array([-ux[1], ux[0]])
    centre = lm[48:68].mean(0) + uy * PROFILE_DOWN * iod
    sx, sy = PROFILE_WIDTH * iod / PROFILE_COLS, PROFILE_HEIGHT * iod / PROFILE_ROWS
    # patch (u, v) -> image: columns along the eye line, rows across it
    a = np.array([[ux[0] * sx, uy[0] * sy, 0.0], [ux[1] * sx, uy[1] * sy, 0.0]])
    a[:, 2] = centre - a[:, :2] @ np.array([PROFILE_COLS / 2, PROFILE_ROWS / 2])
    image = np.asarray(image)
    # Only the pixels the patch reads (its corners' box, with room for interpolation): the
    # brightest channel of a whole 720p frame cost ~20 ms per call; the patch reads a few percent of it.
    # Clipped at the frame's edges, where BORDER_REPLICATE repeats the same pixels either way.
    corners = a[:, :2] @ np.array([[0, PROFILE_COLS, 0, PROFILE_COLS], [0, 0, PROFILE_ROWS, PROFILE_ROWS]]) + a[:, 2:]
    h, w = image.shape[:2]
    x0, y0 = (max(0, int(np.floor(v)) - _MARGIN) for v in corners.min(axis=1))
    x1, y1 = (min(n, int(np.ceil(v)) + _MARGIN) for v, n in zip(corners.max(axis=1), (w, h)))
    if x1 - x0 < 2 or y1 - y0 < 2:         # the patch lies off the frame: read the frame's edge
        x0, y0, x1, y1 = 0, 0, w, h
    value = image[y0:y1, x0:x1].max(axis=2).astype(np.float32)
    a[:, 2] -= (x0, y0)
    patch = cv2.warpAffine(value, a, (PROFILE_COLS, PROFILE_ROWS), flags=cv2.INTER_AREA | cv2.WARP_INVERSE_MAP,
                           borderMode=cv2.BORDER_REPLICATE)
    patch = (patch - patch.mean()) / max(float(patch.std()), 1e-3)
    prof = patch[:, PROFILE_COLS // 4: 3 * PROFILE_COLS // 4].mean(axis=1)
    return [round(float(v), 3) for v in prof]


def _jaw(lm: np.ndarray) -> float:
    # Jaw width does not change when the mouth opens (the face height does).
    return max(float(np.linalg.norm(lm[16] - lm[0])), 1e-6)


def mouth_open(lm: np.ndarray) -> float:
    lm = np.asarray(lm, np.float64)
    return float(np.mean([np.linalg.norm(lm[a] - lm[b]) for a, b in _INNER_PAIRS]) / _jaw(lm))


def eye_open(lm: np.ndarray) -> float:
    """Mean eye aspect ratio of both eyes (lid gap over eye width)."""
    return float(np.mean(eye_aspect(lm)))


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
        # the target's opening is kept: the window needs it to tell whether the target moved
        mt = None if target_lm is None else mouth_open(target_lm)
        return {"mouth_target": mt, "mouth_result": None, "mouth_delta": None, "eye_delta": None}
    mt, mr = mouth_open(target_lm), mouth_open(result_lm)
    if result_frame_lm is not None:
        mr = min(mr, mouth_open(result_frame_lm))
    return {"mouth_target": mt, "mouth_result": mr, "mouth_delta": abs(mr - mt),
            "eye_delta": abs(eye_open(result_lm) - eye_open(target_lm))}


def window_correlation(target_open, target_prof, result_prof) -> float | None:
    """Correlation of the mouth profiles' changes over one window (frames x rows, each frame's
    profile minus the window's mean profile): 1 when the result's mouth changes exactly as the
    target's, ~0 when it does not follow. None (no evidence) for a short window or one where the
    target's mouth hardly moves (std of its landmark opening < MIN_TARGET_STD)."""
    t_open = np.asarray(target_open, np.float64)
    if len(t_open) < MIN_WINDOW_FRAMES or t_open.std() < MIN_TARGET_STD:
        return None
    t = np.asarray(target_prof, np.float64)
    r = np.asarray(result_prof, np.float64)
    t, r = t - t.mean(axis=0), r - r.mean(axis=0)
    et, er = float((t * t).sum()), float((r * r).sum())
    if et < 1e-12:
        return None
    if er < 1e-12:          # frozen: nothing follows the target
        return 0.0
    return float((t * r).sum() / np.sqrt(et * er))


def add_window_correlation(records: list[dict], window: int) -> None:
    """Fill ``expression_corr`` on every face record that has mouth profiles and the target's
    opening, per track, over the ``window`` evaluated frames centred on it (in place). Records
    without profiles (made before they existed) keep the value they have."""
    tracks: dict = defaultdict(list)
    for rec in records:
        for f in rec.get("faces", []):
            if (f.get("mouth_target") is not None and f.get("mouth_profile_target") is not None
                    and f.get("mouth_profile_result") is not None):
                tracks[f.get("track_id")].append(f)
    half = max(1, int(window)) // 2
    for faces in tracks.values():
        t_open = np.array([f["mouth_target"] for f in faces])
        t_prof = np.array([f["mouth_profile_target"] for f in faces])
        r_prof = np.array([f["mouth_profile_result"] for f in faces])
        for i, f in enumerate(faces):
            lo, hi = max(0, i - half), min(len(faces), i + half + 1)
            c = window_correlation(t_open[lo:hi], t_prof[lo:hi], r_prof[lo:hi])
            f["expression_corr"] = None if c is None else round(c, 4)
