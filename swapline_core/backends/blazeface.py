"""BlazeFace short range: MediaPipe's SSD anchors, box and keypoint decoding, weighted NMS, tiling.

Follows the options of MediaPipe's published ``face_detection_short_range`` graph (0.10.21):
SsdAnchors with 4 layers, min/max scale 0.1484375/0.75, strides 8, 16, 16, 16, aspect ratio 1 plus
the interpolated anchor (so 2 anchors per cell at stride 8 and 6 where the three stride-16 layers
share a grid: 16*16*2 + 8*8*6 = 896), anchor offset 0.5, fixed anchor size (every anchor 1x1);
TensorsToDetections with 16 coordinates per anchor in reverse order (x, y, w, h, then six x, y
keypoints), x/y/w/h scale 128, sigmoid scores clipped to +-100, min score 0.5; weighted NMS at
IoU 0.3 (a cluster's box and keypoints are its members' score-weighted mean, its score the best
member's). Input: RGB scaled to [-1, 1], the image letterboxed into the square.

Keypoints, subject's side first as MediaPipe names them: right eye, left eye, nose tip, mouth
centre, right ear tragion, left ear tragion (on an ordinary photo the subject's right is
image-left).

Short range is trained for faces that fill a good part of the square (anchor scales 0.15-0.75 of
its side). A large frame with small faces is also searched on square tiles, at sizes shrinking by
at most 2x a step down to the one where the smallest wanted face fills 15 % of a tile
(:func:`tiles`); tiles overlap so that every face the next larger size cannot find lies wholly
inside one of them, and a detection cut by an inner tile edge is dropped (the whole face is in a
neighbour). A face the mesh then rejects (presence < 0.5) is reported in ``skipped``.
"""
from __future__ import annotations

import math

import cv2
import numpy as np

INPUT = 128
MIN_SCORE = 0.5
NMS_IOU = 0.3
_SCALE = 128.0
_CLIP = 100.0
# The smallest face the model finds well, as a share of the square's side (MTCNN box height):
# t1.jpg's six faces and two sample-clip frames scaled into the square scored 0.74-0.92 at 0.15,
# 0.8-0.98 from 0.2 up to 0.8, and 0.47-0.71 at 0.12. (Large faces need no tile: the whole frame
# is always searched.)
FACE_MIN_SHARE = 0.15


def anchors(size: int = INPUT, strides: tuple[int, ...] = (8, 16, 16, 16)) -> np.ndarray:
    """(896, 2) anchor centres in [0, 1], in the model's output order (MediaPipe SsdAnchors)."""
    out, layer, n = [], 0, len(strides)
    while layer < n:
        per_cell, last = 0, layer
        while last < n and strides[last] == strides[layer]:
            per_cell += 2        # aspect ratio 1.0 and the interpolated-scale anchor
            last += 1
        cells = int(math.ceil(size / strides[layer]))
        ys, xs = np.meshgrid((np.arange(cells) + 0.5) / cells, (np.arange(cells) + 0.5) / cells, indexing="ij")
        centres = np.stack([xs.ravel(), ys.ravel()], 1)
        out.append(np.repeat(centres, per_cell, axis=0))
        layer = last
    return np.concatenate(out).astype(np.float32)


ANCHORS = anchors()


def decode(raw: np.ndarray, logits: np.ndarray, min_score: float = MIN_SCORE):
    """(boxes (K, 4) x1 y1 x2 y2, keypoints (K, 6, 2), scores (K,)) in [0, 1] square units for
    the anchors scoring at least ``min_score``; ``raw`` (896, 16), ``logits`` (896,) or (896, 1)."""
    return decode_ssd(raw, logits, ANCHORS, _SCALE, min_score)


def decode_ssd(raw: np.ndarray, logits: np.ndarray, anchors_: np.ndarray, scale: float, min_score: float):
    """MediaPipe's SSD decode (TensorsToDetections): per anchor scoring at least ``min_score``,
    the box (centre offset, size) and the keypoints of ``raw``'s rows, divided by the input
    ``scale`` and moved by the anchor, in [0, 1] input units. The face and palm detectors share it."""
    # float64: exp(100) overflows float32
    scores = 1.0 / (1.0 + np.exp(-np.clip(logits.reshape(-1).astype(np.float64), -_CLIP, _CLIP)))
    keep = np.flatnonzero(scores >= min_score)
    r, a = raw[keep].astype(np.float32), anchors_[keep]
    centre = r[:, :2] / scale + a
    half = r[:, 2:4] / scale / 2
    boxes = np.concatenate([centre - half, centre + half], 1)
    kps = r[:, 4:].reshape(len(keep), (raw.shape[-1] - 4) // 2, 2) / scale + a[:, None, :]
    return boxes, kps, scores[keep].astype(np.float32)


def _iou(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    lt = np.maximum(box[:2], boxes[:, :2])
    rb = np.minimum(box[2:], boxes[:, 2:])
    inter = np.prod(np.clip(rb - lt, 0, None), axis=1)
    area = lambda b: np.prod(np.clip(b[..., 2:] - b[..., :2], 0, None), axis=-1)  # noqa: E731
    return inter / np.maximum(area(box) + area(boxes) - inter, 1e-12)


def weighted_nms(boxes: np.ndarray, kps: np.ndarray, scores: np.ndarray, iou: float = NMS_IOU):
    """MediaPipe's WEIGHTED non-max suppression; best score first."""
    order = np.argsort(-scores, kind="stable")
    boxes, kps, scores = boxes[order], kps[order], scores[order]
    out_b, out_k, out_s = [], [], []
    left = np.arange(len(scores))
    while len(left):
        group = left[_iou(boxes[left[0]], boxes[left]) > iou]
        group = group if len(group) else left[:1]
        w = scores[group][:, None]
        out_b.append((boxes[group] * w).sum(0) / w.sum())
        out_k.append((kps[group] * w[:, :, None]).sum(0) / w.sum())
        out_s.append(scores[left[0]])
        left = np.setdiff1d(left, group, assume_unique=True)
        left = left[np.argsort(-scores[left], kind="stable")]
    if not out_s:
        return np.zeros((0, 4), np.float32), np.zeros((0, 6, 2), np.float32), np.zeros(0, np.float32)
    return np.asarray(out_b, np.float32), np.asarray(out_k, np.float32), np.asarray(out_s, np.float32)


def tiles(height: int, width: int, min_face: float) -> list[tuple[int, int, int]]:
    """Square windows (x0, y0, side) to search: the whole frame letterboxed, then tiles at sizes
    shrinking by at most 2x a step down to the one where ``min_face`` px is ``FACE_MIN_SHARE``
    of the side (never below the model's own 128 px: smaller tiles would only be upscaled).
    Tiles of one size overlap so that every face the next larger size cannot find (up to ratio
    x FACE_MIN_SHARE of the side) lies wholly inside one of them."""
    full = max(height, width)
    finest = max(float(INPUT), float(min_face) / FACE_MIN_SHARE)
    out = [(0, 0, full)]
    if full <= finest:
        return out
    levels = int(math.ceil(math.log2(full / finest) - 1e-9))
    ratio = (full / finest) ** (1.0 / levels)
    for k in range(1, levels + 1):
        side = int(math.ceil(full / ratio ** k))
        step = max(1, int(side * (1.0 - 1.2 * ratio * FACE_MIN_SHARE)))
        out += [(x, y, side) for y in _starts(height, side, step) for x in _starts(width, side, step)]
    return out


def _starts(length: int, side: int, step: int) -> list[int]:
    if length <= side:
        return [0]
    n = int(math.ceil((length - side) / step))
    return [int(round(i * (length - side) / n)) for i in range(n + 1)]


def tile_input(rgb: np.ndarray, x0: int, y0: int, side: int) -> np.ndarray:
    """(128, 128, 3) float32 in [-1, 1]: the square window, outside the image black."""
    h, w = rgb.shape[:2]
    crop = rgb[y0:min(h, y0 + side), x0:min(w, x0 + side)]
    s = INPUT / side
    out_w, out_h = max(1, int(round(crop.shape[1] * s))), max(1, int(round(crop.shape[0] * s)))
    small = cv2.resize(crop, (out_w, out_h), interpolation=cv2.INTER_AREA if s < 1 else cv2.INTER_LINEAR)
    canvas = np.zeros((INPUT, INPUT, 3), np.float32)
    canvas[:out_h, :out_w] = small
    return canvas / 127.5 - 1.0


def to_frame(boxes, kps, window: tuple[int, int, int]):
    x0, y0, side = window
    off = np.array([x0, y0], np.float32)
    return boxes * side + np.tile(off, 2), kps * side + off


def cut_by_tile(box: np.ndarray, window: tuple[int, int, int], height: int, width: int,
                margin: float = 0.02) -> bool:
    """True when a box (frame px) runs into an edge of its tile that is not the frame's edge: a
    face cut there is found whole in the neighbouring tile, so the cut copy is dropped."""
    x0, y0, side = window
    m = margin * side
    return bool((box[0] < x0 + m and x0 > 0) or (box[1] < y0 + m and y0 > 0)
                or (box[2] > x0 + side - m and x0 + side < width)
                or (box[3] > y0 + side - m and y0 + side < height))
