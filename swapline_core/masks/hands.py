"""Hands over faces: the pixels of a hand that overlap a face box, kept from the target.

The colour occluder cannot see a hand of the same person (its skin passes as face skin:
``occlusion``'s docstring), so hands are found by MediaPipe's hand models instead
(``backends.hands``: palm detection in a square around each face box, then 21 landmarks).

A hand's region is drawn from its landmarks, not as the hull of all 21 (which would fill the gaps
between spread fingers and the space a curled hand does not cover): the palm (the hull of the wrist,
the thumb's base and the four finger bases) grown by half a finger, a capsule one finger wide along
each finger's bones, and a short stub of the forearm below the wrist. The whole is grown a little
(``GROW``) for the landmarks' error. Around that, pixels whose colour is clearly nearer the hand's
own (sampled on the palm) than the face's (sampled in the face box just beyond that band) are
added (``refine_by_colour``): a glove or a hand lit differently from the face gets its
true edge, while a hand of the face's own colour keeps the drawn region.

Sizes are in units of the hand's scale ``s``, the wrist to middle-finger-base distance (an adult's
is about 9 cm; a finger is about 2 cm wide, so ``FINGER`` = 0.22 s).
"""
from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from ..backends import mesh_models as mm
from ..backends.cache import cached
from ..backends.hands import FINGERS, PALM_POINTS, Hand, HandDetector
from ..types import as_rgb_uint8

FINGER = 0.22          # finger width / s
THUMB = 0.26           # thumb width / s
FOREARM = 0.45         # length of the forearm stub below the wrist / s
FOREARM_WIDTH = 0.7    # its width / s
GROW = 0.05            # the drawn region grown by this much of s (and one pixel): the landmarks' error
RING = 0.15            # how far past the drawn region colour may add pixels / s
COLOUR_RATIO = 0.5     # a ring pixel is hand when its Lab distance to the hand is below this x its
                       # distance to the face
MARGIN = 0.15          # a face's window: its box grown by this share of its size on each side
# A hand over a face is at the face's depth or nearer the camera, so its scale s is at least what it
# would be beside the face: about 0.45 of the face box's longer side (9 cm against a 20 cm box;
# 0.32-0.50 measured on the bernini clip's hands under the chin). Below MIN_SCALE x the face size
# (half that, for a palm turned from the camera) a "hand" is a detection on the face itself: the
# sample clip's mouth and glasses read as hands of 0.12-0.15 on 2 of its 48 frames.
MIN_SCALE = 0.2
# how far past its landmarks' box a hand's region can reach / s (forearm stub, its half width,
# GROW and RING: 0.45 + 0.35 + 0.05 + 0.15, rounded up)
REACH = 1.2


def window(box: Sequence[float], shape: tuple[int, ...], margin: float = MARGIN) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1) integer pixels of a face box (x1 y1 x2 y2) grown by ``margin`` x its
    size on each side, clipped to the frame: where a hand counts as over this face."""
    x1, y1, x2, y2 = (float(v) for v in box[:4])
    g = margin * max(x2 - x1, y2 - y1)
    h, w = shape[:2]
    return (max(0, int(np.floor(x1 - g))), max(0, int(np.floor(y1 - g))),
            min(w, int(np.ceil(x2 + g))), min(h, int(np.ceil(y2 + g))))


def drawn(hand: Hand, shape: tuple[int, ...]) -> tuple[np.ndarray, tuple[int, int]]:
    """(uint8 0/255 mask, (x0, y0) of its top-left in the frame): the hand's region drawn from its
    landmarks, in a window around the hand (clipped to the frame)."""
    s = max(hand.size, 2.0)
    p = np.asarray(hand.points, np.float64)
    up = (p[9] - p[0]) / s
    wrist_end = p[0] - FOREARM * s * up
    pad = int(np.ceil(max(FOREARM_WIDTH, THUMB) * s + (GROW + RING) * s)) + 3
    lo = np.floor(np.minimum(p.min(0), wrist_end) - pad).astype(int)
    hi = np.ceil(np.maximum(p.max(0), wrist_end) + pad).astype(int)
    lo = np.maximum(lo, 0)
    hi = np.minimum(hi, [shape[1], shape[0]])
    if (hi <= lo).any():
        return np.zeros((0, 0), np.uint8), (0, 0)
    m = np.zeros((hi[1] - lo[1], hi[0] - lo[0]), np.uint8)
    shift = 4                                        # sub-pixel drawing: coordinates x 16
    q = lambda a: np.round((np.asarray(a) - lo) * (1 << shift)).astype(np.int32)  # noqa: E731
    cv2.fillConvexPoly(m, cv2.convexHull(q(p[list(PALM_POINTS)])), 255, cv2.LINE_AA, shift)
    cv2.polylines(m, [cv2.convexHull(q(p[list(PALM_POINTS)]))], True, 255,
                  max(1, int(round(FINGER * s))), cv2.LINE_AA, shift)
    for k, finger in enumerate(FINGERS):
        chain = [0 if k == 0 else finger[0]] + list(finger if k == 0 else finger[1:])
        width = max(1, int(round((THUMB if k == 0 else FINGER) * s)))
        cv2.polylines(m, [q(p[chain])], False, 255, width, cv2.LINE_AA, shift)
    cv2.line(m, tuple(q(p[0])), tuple(q(wrist_end)), 255, max(1, int(round(FOREARM_WIDTH * s))), cv2.LINE_AA, shift)
    grow = int(round(GROW * s)) + 1
    m = cv2.dilate((m >= 128).astype(np.uint8) * 255, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * grow + 1,) * 2))
    return m, (int(lo[0]), int(lo[1]))


def refine_by_colour(mask: np.ndarray, lab: np.ndarray, palm: np.ndarray, face_lab: np.ndarray | None,
                     reach: int) -> np.ndarray:
    """``mask`` plus the pixels within ``reach`` of it whose Lab colour is nearer the hand's (the
    median over ``palm``) than COLOUR_RATIO x their distance to the face's (``face_lab``, a median
    colour; None: no face colour known, nothing added)."""
    if face_lab is None or reach < 1 or not palm.any():
        return mask
    hand_lab = np.median(lab[palm], axis=0)
    ring = cv2.dilate(mask, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * reach + 1,) * 2)) > 0
    ring &= mask == 0
    if not ring.any():
        return mask
    px = lab[ring].astype(np.float32)
    d_hand = np.linalg.norm(px - hand_lab, axis=1)
    d_face = np.linalg.norm(px - face_lab, axis=1)
    added = np.zeros_like(mask)
    added[ring] = np.where(d_hand < COLOUR_RATIO * d_face, 255, 0).astype(np.uint8)
    # a speck or a one-pixel thread of the hand's colour (texture beside the hand) is not hand
    added = cv2.morphologyEx(added, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    out = np.maximum(mask, added)
    # keep only what touches the drawn hand
    _, labels = cv2.connectedComponents((out > 0).astype(np.uint8), connectivity=8)
    keep = np.unique(labels[mask > 0])
    return np.where(np.isin(labels, keep[keep > 0]), 255, 0).astype(np.uint8)


def _face_colour(lab: np.ndarray, box: Sequence[float], hand_mask: np.ndarray, reach: int) -> np.ndarray | None:
    """Median Lab of the face next to the hand: the pixels of the face box between ``reach`` and
    twice that from the drawn hand (a face lit from one side has two colours, and the one that
    matters is the one the hand's edge is told from); failing that, the middle of the box."""
    x0, y0, x1, y1 = window(box, lab.shape, 0.0)
    inside = np.zeros(hand_mask.shape, bool)
    inside[y0:y1, x0:x1] = True
    kernel = lambda r: cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1,) * 2)  # noqa: E731
    band = (cv2.dilate(hand_mask, kernel(2 * reach)) > 0) & ~(cv2.dilate(hand_mask, kernel(reach)) > 0) & inside
    if band.sum() >= 4:
        return np.median(lab[band], axis=0).astype(np.float32)
    w, h = x1 - x0, y1 - y0
    mid = np.zeros_like(inside)
    mid[y0 + h // 4:y1 - h // 4, x0 + w // 4:x1 - w // 4] = True
    mid &= hand_mask == 0
    return np.median(lab[mid], axis=0).astype(np.float32) if mid.sum() >= 4 else None


def hand_region(frame: np.ndarray, hand: Hand, box: Sequence[float] | None = None
                ) -> tuple[np.ndarray, tuple[int, int]]:
    """(uint8 mask, 255 on the hand; (x0, y0) of its top-left in the frame): the hand's drawn
    region refined by colour against the face of ``box`` (None: the drawn region only), over the
    window spanning the hand and the box."""
    local, (x0, y0) = drawn(hand, frame.shape)
    if not local.size or box is None:
        return local, (x0, y0)
    fx0, fy0, fx1, fy1 = window(box, frame.shape, 0.0)
    ux0, uy0 = min(x0, fx0), min(y0, fy0)
    ux1, uy1 = max(x0 + local.shape[1], fx1), max(y0 + local.shape[0], fy1)
    sub = np.zeros((uy1 - uy0, ux1 - ux0), np.uint8)
    sub[y0 - uy0:y0 - uy0 + local.shape[0], x0 - ux0:x0 - ux0 + local.shape[1]] = local
    lab = cv2.cvtColor(np.ascontiguousarray(frame[uy0:uy1, ux0:ux1]), cv2.COLOR_RGB2Lab)
    palm = np.zeros_like(sub)
    corners = np.round(hand.points[list(PALM_POINTS)] - [ux0, uy0]).astype(np.int32)
    cv2.fillConvexPoly(palm, cv2.convexHull(corners), 255)
    reach = int(round(RING * hand.size))
    if reach < 1:
        return sub, (ux0, uy0)
    face = _face_colour(lab, np.asarray(box, np.float64)[:4] - [ux0, uy0, ux0, uy0], sub, reach)
    return refine_by_colour(sub, lab, palm > 0, face, reach), (ux0, uy0)


def hand_masks(frame_rgb: np.ndarray, face_boxes: Sequence[Sequence[float]], detector: HandDetector,
               margin: float = MARGIN, hands: Sequence[Hand] | None = None) -> list[np.ndarray]:
    """Per face box, an (H, W) uint8 mask in FRAME coordinates: 255 on the pixels of a hand inside
    that face's window (its box x1 y1 x2 y2 grown by ``margin`` x its size each side, ``window``),
    0 elsewhere; all zeros when no hand overlaps the window. 255 means "keep the target here".
    A hand smaller than ``MIN_SCALE`` x the face's size is not counted for that face.

    ``frame_rgb`` is the (H, W, 3) uint8 RGB frame; ``detector`` a ``backends.hands.HandDetector``
    (its models are run once for all the boxes: palm detection in a square around each box, then
    landmarks on each hand found); ``hands`` skips the models when the caller already has them."""
    frame_rgb = np.asarray(frame_rgb)
    if frame_rgb.dtype != np.uint8 or frame_rgb.ndim != 3 or frame_rgb.shape[2] != 3:
        raise ValueError(f"hand_masks takes an (H, W, 3) uint8 RGB frame, got {frame_rgb.dtype} {frame_rgb.shape}")
    boxes = [np.asarray(b, np.float64)[:4] for b in face_boxes]
    if hands is None:
        hands = detector.hands(frame_rgb, boxes) if boxes else []
    shape = frame_rgb.shape[:2]
    out = []
    for box in boxes:
        x0, y0, x1, y1 = window(box, shape, margin)
        m = np.zeros(shape, np.uint8)
        face_size = max(box[2] - box[0], box[3] - box[1])
        for hand in hands:
            if hand.size < MIN_SCALE * face_size:
                continue
            hb = hand.box
            r = REACH * hand.size
            if hb[2] + r < x0 or hb[0] - r > x1 or hb[3] + r < y0 or hb[1] - r > y1:
                continue                     # too far for any of its drawn region to reach the window
            region, (rx, ry) = hand_region(frame_rgb, hand, box)
            ix0, iy0 = max(x0, rx), max(y0, ry)
            ix1, iy1 = min(x1, rx + region.shape[1]), min(y1, ry + region.shape[0])
            if ix1 > ix0 and iy1 > iy0:
                np.maximum(m[iy0:iy1, ix0:ix1], region[iy0 - ry:iy1 - ry, ix0 - rx:ix1 - rx], out=m[iy0:iy1, ix0:ix1])
        out.append(m)
    return out


def shared_detector(model_dir=None) -> tuple[HandDetector | None, str | None]:
    """(the hand detector, cached by its model file like every model, None) or (None, why): a
    checkout whose hand model files are missing or altered (they ship in models/mediapipe/;
    scripts/fetch_mesh_models.py restores them) still swaps, and each face's record says the rule
    was off."""
    folder = mm.DEFAULT_DIR if model_dir is None else model_dir
    try:
        return cached("hand-detector", str(mm.model_path(mm.PALM, folder)), (),
                      lambda: HandDetector(folder)), None
    except mm.MeshModelsMissing as e:
        return None, f"hand models missing: {e}"


def keep_hands(frames: Sequence[np.ndarray], items, keep) -> str | None:
    """Run the detector once per frame over its faces' boxes and hand each face's hand pixels to
    ``keep(item, frame_map)`` (the mask stack's ``keep_pixels``); ``items`` carry ``i`` (frame) and
    ``face``. Returns why the rule could not run, or None."""
    det, why = shared_detector()
    if det is None:
        return why
    by_frame: dict[int, list] = {}
    for it in items:
        by_frame.setdefault(it.i, []).append(it)
    rgb = {i: as_rgb_uint8(frames[i]) for i in by_frame}
    # every frame's faces in one set of model batches (a square at a time costs 1.5x as much)
    found = det.hands_in([rgb[i] for i in by_frame], [[it.face.bbox for it in its] for its in by_frame.values()])
    for (i, its), hands in zip(by_frame.items(), found):
        for it, m in zip(its, hand_masks(rgb[i], [it.face.bbox for it in its], det, hands=hands)):
            keep(it, m)
    return None
