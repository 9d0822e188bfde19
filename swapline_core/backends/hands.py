"""MediaPipe's hand models near faces: palm detection, then 21 hand landmarks on the rotated hand crop.

Palm detection follows the options of MediaPipe's published ``palm_detection_cpu`` graph (0.10.21):
a 192x192 RGB input in [0, 1] (letterboxed, outside black); SsdAnchors with 4 layers, strides 8, 16,
16, 16, two anchors per cell at stride 8 and six where the stride-16 layers share a grid (24*24*2 +
12*12*6 = 2016), fixed anchor size; TensorsToDetections with 18 coordinates per anchor (x, y, w, h,
then seven x, y keypoints: wrist centre, index MCP, middle MCP, ring MCP, pinky MCP, thumb CMC,
thumb MCP), scale 192, sigmoid scores clipped to +-100, min score 0.5; weighted NMS at IoU 0.3.

The hand crop (``palm_detection_detection_to_roi``): the palm box rotated so the wrist-to-middle-MCP
line points up, its centre moved half the box's height towards the fingers, squared on its long
side and scaled 2.6x. The landmark model reads that square at 224x224 in [0, 1] and returns 21 x
(x, y, z) in crop pixels (MediaPipe's hand topology: 0 wrist, 1-4 thumb, 5-8 index, 9-12 middle,
13-16 ring, 17-20 pinky, each finger base to tip) and a hand-presence probability (the graph
thresholds it at 0.5 as it comes, no sigmoid).

A hand over a face is near that face, so the detector reads only a square around each face box
(:func:`region`), not the frame: a few ms per face at any frame size. Palms found in two faces'
squares are merged by the same weighted NMS in frame pixels.

Batching: the palm graph flattens a batch into its anchor axis layer by layer ((1, N*2016, 18):
every item's stride-8 rows, then every item's stride-16 rows), which :func:`split_batch` undoes, so
all faces' squares run in one invoke; the landmark model batches plainly. Interpreters are kept per
batch size, so batches are cut into powers of two (``mesh_models.run``'s cache).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from ..parallel import map_frames
from . import blazeface as bf
from . import face_mesh as fm
from . import mesh_models as mm

PALM_INPUT = 192
HAND_INPUT = 224
PALM_STRIDES = (8, 16, 16, 16)
PALM_ANCHORS = bf.anchors(PALM_INPUT, PALM_STRIDES)
# rows per item in the first (stride 8) block of the flattened batch output
_FIRST_BLOCK = (PALM_INPUT // 8) ** 2 * 2
MIN_SCORE = 0.5
NMS_IOU = 0.3
PRESENCE = 0.5
# palm box -> hand crop (MediaPipe's RectTransformation for palm detections)
HAND_SCALE = 2.6
HAND_SHIFT = 0.5
# The square read around a face box: REGION x the box's longer side, its centre moved REGION_DOWN
# x that side below the box's centre (hands over a face come up from below more than down from
# above). A palm box at the face's depth is about half the face box (0.35-0.57 measured under the
# bernini clip's chin), so it fills 0.12-0.19 of the square: about the smallest the detector's
# anchors (0.15-0.75 of its input) find reliably, so a larger square would lose such palms; a
# palm nearer the camera than the face is larger and still fits.
REGION = 3.0
REGION_DOWN = 0.25
BATCH = 8
# the landmark points whose hull is the palm (wrist, thumb CMC, the four finger MCPs)
PALM_POINTS = (0, 1, 5, 9, 13, 17)
FINGERS = ((1, 2, 3, 4), (5, 6, 7, 8), (9, 10, 11, 12), (13, 14, 15, 16), (17, 18, 19, 20))


@dataclass
class Hand:
    points: np.ndarray      # (21, 2) frame pixels, MediaPipe's hand topology
    presence: float         # the landmark model's hand-presence probability
    score: float            # the palm detector's score
    palm: np.ndarray        # palm box x1 y1 x2 y2, frame pixels

    @property
    def box(self) -> np.ndarray:
        return np.concatenate([self.points.min(0), self.points.max(0)]).astype(np.float32)

    @property
    def size(self) -> float:
        """Wrist to middle-finger MCP, the hand's scale (px)."""
        return float(np.linalg.norm(self.points[9] - self.points[0]))


def decode(raw: np.ndarray, logits: np.ndarray, min_score: float = MIN_SCORE):
    """(boxes (K, 4) x1 y1 x2 y2, keypoints (K, 7, 2), scores (K,)) in [0, 1] input units for the
    anchors scoring at least ``min_score``; ``raw`` (2016, 18), ``logits`` (2016,) or (2016, 1)."""
    return bf.decode_ssd(raw, logits, PALM_ANCHORS, PALM_INPUT, min_score)


def split_batch(out: np.ndarray, n: int) -> np.ndarray:
    """(n, 2016, C) from the palm graph's (1, n * 2016, C) output of a batch of ``n``."""
    out = out.reshape(n * len(PALM_ANCHORS), -1)
    first = out[:n * _FIRST_BLOCK].reshape(n, _FIRST_BLOCK, -1)
    rest = out[n * _FIRST_BLOCK:].reshape(n, len(PALM_ANCHORS) - _FIRST_BLOCK, -1)
    return np.concatenate([first, rest], 1)


def region(box: Sequence[float], scale: float = REGION, down: float = REGION_DOWN) -> tuple[float, float, float]:
    """(x0, y0, side) of the square the palm detector reads for one face box (x1 y1 x2 y2)."""
    x1, y1, x2, y2 = (float(v) for v in box[:4])
    s = max(x2 - x1, y2 - y1, 1.0)
    side = scale * s
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2 + down * s
    return cx - side / 2, cy - side / 2, side


def region_input(rgb: np.ndarray, win: tuple[float, float, float]) -> np.ndarray:
    """(192, 192, 3) float32 in [0, 1]: the square window, outside the image black (BORDER_ZERO).
    A window larger than the input is area-averaged (a warp would alias a 720p face's square)."""
    x0, y0, side = win
    s = PALM_INPUT / side
    h, w = rgb.shape[:2]
    if s >= 1:
        m = np.array([[s, 0.0, -x0 * s], [0.0, s, -y0 * s]])
        out = cv2.warpAffine(rgb, m, (PALM_INPUT, PALM_INPUT), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)
        return out.astype(np.float32) / 255.0
    canvas = np.zeros((PALM_INPUT, PALM_INPUT, 3), np.float32)
    cx0, cy0 = max(0, int(np.floor(x0))), max(0, int(np.floor(y0)))
    cx1, cy1 = min(w, int(np.ceil(x0 + side))), min(h, int(np.ceil(y0 + side)))
    if cx1 <= cx0 or cy1 <= cy0:
        return canvas
    # the crop's corners in the input, rounded: at most half an input pixel (1/192 of the square) off
    px0, py0 = max(0, int(round((cx0 - x0) * s))), max(0, int(round((cy0 - y0) * s)))
    pw = max(1, min(PALM_INPUT - px0, int(round((cx1 - cx0) * s))))
    ph = max(1, min(PALM_INPUT - py0, int(round((cy1 - cy0) * s))))
    small = cv2.resize(rgb[cy0:cy1, cx0:cx1], (pw, ph), interpolation=cv2.INTER_AREA)
    canvas[py0:py0 + ph, px0:px0 + pw] = small.astype(np.float32) / 255.0
    return canvas


def hand_matrix(box: np.ndarray, kps: np.ndarray) -> np.ndarray:
    """2x3 affine image -> 224x224 hand crop for a palm detection (box x1 y1 x2 y2 and its seven
    keypoints, frame pixels): MediaPipe's palm_detection_detection_to_roi."""
    box, kps = np.asarray(box, np.float64), np.asarray(kps, np.float64)
    w, h = box[2] - box[0], box[3] - box[1]
    wrist, middle = kps[0], kps[2]
    rot = math.pi / 2 - math.atan2(-(middle[1] - wrist[1]), middle[0] - wrist[0])
    across = np.array([math.cos(rot), math.sin(rot)])
    up = np.array([math.sin(rot), -math.cos(rot)])        # towards the fingers
    centre = (box[:2] + box[2:]) / 2 + HAND_SHIFT * h * up
    return fm.square_matrix(centre, HAND_SCALE * max(w, h), across, HAND_INPUT)


def hand_crop(rgb: np.ndarray, m: np.ndarray) -> np.ndarray:
    out = cv2.warpAffine(rgb, m, (HAND_INPUT, HAND_INPUT), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return out.astype(np.float32) / 255.0


def _chunks(n: int, most: int):
    """Powers of two up to ``most`` covering n items (one interpreter per batch size)."""
    s = 0
    while s < n:
        k = min(most, 1 << ((n - s).bit_length() - 1))
        yield s, s + k
        s += k


class HandDetector:
    """Palm detection around face boxes, then hand landmarks: ``hands(frame, face_boxes)``.

    Reads ``mesh_models.PALM`` (the full palm detector) and ``mesh_models.HAND`` (the lite
    landmark model); docs/models.md gives the measured reasons. A missing or altered file raises
    ``mesh_models.MeshModelsMissing`` naming it, the folder and the setup command."""

    def __init__(self, model_dir: str | Path | None = None, threads: int = 2,
                 min_score: float = MIN_SCORE, presence: float = PRESENCE) -> None:
        self.model_dir = Path(model_dir) if model_dir is not None else mm.DEFAULT_DIR
        self.palm_model, self.landmark_model = mm.PALM, mm.HAND
        self.threads = int(threads)
        self.min_score = float(min_score)
        self.presence = float(presence)
        mm.check_hands(self.model_dir)

    def model_files(self) -> list[tuple[str, str]]:
        """(role, path) of the two .tflite files, for provenance and cache keys."""
        return [(mm.FILES[n].role, str(mm.model_path(n, self.model_dir)))
                for n in (self.palm_model, self.landmark_model)]

    def palms(self, rgb: np.ndarray, face_boxes: Sequence[Sequence[float]]):
        """(boxes (K, 4), keypoints (K, 7, 2), scores (K,)) of the palms in the squares around
        ``face_boxes``, frame pixels, merged across squares by weighted NMS."""
        return self.palms_in([rgb], [face_boxes])[0]

    def palms_in(self, frames: Sequence[np.ndarray], face_boxes: Sequence[Sequence[Sequence[float]]]) -> list[tuple]:
        """:meth:`palms` of several frames (``face_boxes`` per frame), every frame's squares in the
        same batches: a 16-frame chunk's one face per frame runs as two batches of 8 (2.8 ms a
        square against 4.3 ms one at a time, 2 cores)."""
        wins = [(f, region(b)) for f, boxes in enumerate(face_boxes) for b in boxes]
        found: list[list] = [[[], [], []] for _ in frames]
        if wins:
            batch = np.stack(map_frames(lambda fw: region_input(frames[fw[0]], fw[1]), wins))
            for s, e in _chunks(len(batch), BATCH):
                raw, logits = mm.run(self.palm_model, batch[s:e], self.model_dir, self.threads)
                raw, logits = split_batch(raw, e - s), split_batch(logits, e - s)
                for n, (f, (x0, y0, side)) in enumerate(wins[s:e]):
                    b, k, sc = decode(raw[n], logits[n], self.min_score)
                    off = np.array([x0, y0], np.float32)
                    for acc, v in zip(found[f], (b * side + np.tile(off, 2), k * side + off, sc)):
                        acc.append(v)
        out = []
        for boxes, kps, scores in found:
            if not boxes:
                out.append((np.zeros((0, 4), np.float32), np.zeros((0, 7, 2), np.float32), np.zeros(0, np.float32)))
                continue
            boxes, kps, scores = np.concatenate(boxes), np.concatenate(kps), np.concatenate(scores)
            out.append((boxes, kps, scores) if not len(scores) else bf.weighted_nms(boxes, kps, scores, NMS_IOU))
        return out

    def landmarks(self, crops_of: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[list[np.ndarray], np.ndarray]:
        """(21-point hands in frame pixels, presence probabilities), one per (frame, hand-crop
        matrix) pair, the pairs from any frames in one set of batches."""
        if not len(crops_of):
            return [], np.zeros(0, np.float32)
        crops = np.stack([hand_crop(rgb, m) for rgb, m in crops_of])
        points, presence = [], []
        for s, e in _chunks(len(crops), BATCH):
            lm, flag, _, _ = mm.run(self.landmark_model, crops[s:e], self.model_dir, self.threads)
            points.append(lm.reshape(-1, 21, 3))
            presence.append(flag.reshape(-1))
        points, presence = np.concatenate(points), np.concatenate(presence)
        return [fm.to_image(p, m).astype(np.float32) for p, (_, m) in zip(points, crops_of)], presence

    def hands(self, rgb: np.ndarray, face_boxes: Sequence[Sequence[float]]) -> list[Hand]:
        """The hands near any of ``face_boxes`` (x1 y1 x2 y2, frame pixels) whose landmark model
        sees a hand (presence >= ``presence``); ``rgb`` is the frame, (H, W, 3) uint8 RGB."""
        return self.hands_in([rgb], [face_boxes])[0]

    def hands_in(self, frames: Sequence[np.ndarray],
                 face_boxes: Sequence[Sequence[Sequence[float]]]) -> list[list[Hand]]:
        """:meth:`hands` of several frames (``face_boxes`` per frame), each model's inputs from
        every frame batched together."""
        frames = [np.ascontiguousarray(rgb) for rgb in frames]
        for rgb in frames:
            if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
                raise ValueError(f"hand detection takes an (H, W, 3) uint8 RGB frame, got {rgb.dtype} {rgb.shape}")
        palms = self.palms_in(frames, face_boxes)
        owners = [(f, n) for f, (boxes, _, _) in enumerate(palms) for n in range(len(boxes))]
        mats = [hand_matrix(palms[f][0][n], palms[f][1][n]) for f, n in owners]
        points, presence = self.landmarks([(frames[f], m) for (f, _), m in zip(owners, mats)])
        out: list[list[Hand]] = [[] for _ in frames]
        for (f, n), p, pr in zip(owners, points, presence):
            if pr >= self.presence:
                out[f].append(Hand(p, float(pr), float(palms[f][2][n]), palms[f][0][n]))
        return out

