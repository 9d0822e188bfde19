"""MediaPipe's 468-point face mesh: the crop it reads, running it, and the points derived from it.

The mesh model reads a 192x192 RGB crop in [0, 1], rotated so the eyes are level, and returns
468 x (x, y, z) in crop pixels plus a face-presence logit. MediaPipe crops the detector's box
scaled 1.5x (``detection_matrix``), and when tracking the previous mesh's box scaled 1.5x. A face
this pack placed carries only its mesh box and five points, so its crop (``face_matrix``) is
sized from the eye and mouth points instead, fitted to match MediaPipe's tracking crop; detect's
second pass, ``refine`` and ``landmarks68`` all read that same crop for the same face.

The iris model (64x64 eye crops, 2.3x the eye-corner distance, the image-right eye mirrored)
replaces the 71 mesh points around each eye and brow, as MediaPipe's "refine landmarks" does.

Indices into the mesh (MediaPipe's canonical face model; "right" is the subject's right, which is
image-left on an ordinary photo).
"""
from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

SIZE = 192
# eye contours (the 16 points of FACEMESH_RIGHT_EYE / FACEMESH_LEFT_EYE): their mean is the eye
# centre, near where MTCNN and SCRFD put their eye points (the ArcFace template's eyes)
RIGHT_EYE = (33, 7, 163, 144, 145, 153, 154, 155, 133, 246, 161, 160, 159, 158, 157, 173)
LEFT_EYE = (263, 249, 390, 373, 374, 380, 381, 382, 362, 466, 388, 387, 386, 385, 384, 398)
NOSE_TIP = 1
MOUTH_RIGHT, MOUTH_LEFT = 61, 291

# MediaPipe crops a detection's box scaled DETECTION_SCALE, squared, rotated by the eye line.
DETECTION_SCALE = 1.5
# A known face (its mesh box and five points) is cropped around its box centre, side SIDE * d
# with d = max(eye-mid to mouth-mid distance, IOD / IOD_PER_D): the eye-mouth distance keeps
# its size under yaw, the IOD under pitch. Fitted to the crop MediaPipe's tracking derives from a
# mesh (the mesh's box in the eye-line frame, 1.5x, squared): 3.8 d, the median over t1.jpg's
# faces and the sample clip's frames.
SIDE = 3.8
IOD_PER_D = 1.1


def square_matrix(centre: np.ndarray, side: float, across: np.ndarray, size: int = SIZE) -> np.ndarray:
    """2x3 affine from the image to a size x size crop: the square of ``side`` px around
    ``centre`` whose x axis runs along ``across``."""
    across = np.asarray(across, np.float64)
    n = float(np.linalg.norm(across))
    ux = across / n if n > 1e-6 else np.array([1.0, 0.0])
    uy = np.array([-ux[1], ux[0]])
    rot = np.stack([ux, uy]) * (size / max(float(side), 1.0))
    return np.concatenate([rot, (size / 2 - rot @ np.asarray(centre, np.float64))[:, None]], 1)


def detection_matrix(box: np.ndarray, keypoints: np.ndarray) -> np.ndarray:
    """MediaPipe's crop for a BlazeFace detection (box x1 y1 x2 y2, its six keypoints)."""
    box = np.asarray(box, np.float64)
    side = DETECTION_SCALE * max(box[2] - box[0], box[3] - box[1])
    return square_matrix((box[:2] + box[2:]) / 2, side, np.asarray(keypoints[1]) - np.asarray(keypoints[0]))


def face_matrix(bbox: np.ndarray, kps: np.ndarray) -> np.ndarray:
    """The crop for a face placed by the mesh (its mesh box and five points)."""
    kps = np.asarray(kps, np.float64)
    across = kps[1] - kps[0]
    iod = float(np.linalg.norm(across))
    ux = across / iod if iod > 1e-6 else np.array([1.0, 0.0])
    down = np.array([-ux[1], ux[0]])
    em = float(np.dot((kps[3] + kps[4]) / 2 - (kps[0] + kps[1]) / 2, down))
    d = max(em, iod / IOD_PER_D, 1.0)
    bbox = np.asarray(bbox, np.float64)
    return square_matrix((bbox[:2] + bbox[2:]) / 2, SIDE * d, across)


def crop(rgb: np.ndarray, m: np.ndarray) -> np.ndarray:
    """The (192, 192, 3) float32 crop in [0, 1]; outside the image the border is repeated."""
    out = cv2.warpAffine(rgb, m, (SIZE, SIZE), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return out.astype(np.float32) / 255.0


def to_image(points: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Crop-pixel (x, y) points back to image coordinates through the inverse of ``m``."""
    inv = cv2.invertAffineTransform(m)
    return points[..., :2] @ inv[:, :2].T + inv[:, 2]


def image_scale(m: np.ndarray) -> float:
    """Image pixels per crop pixel of the crop matrix ``m`` (a similarity: one scale)."""
    return float(np.sqrt(abs(np.linalg.det(np.asarray(m, np.float64)[:, :2])))) ** -1


def five_points(mesh: np.ndarray) -> np.ndarray:
    """(5, 2) eyes, nose tip, mouth corners, image-left first as MTCNN and SCRFD order them."""
    return np.stack([mesh[list(RIGHT_EYE)].mean(0), mesh[list(LEFT_EYE)].mean(0), mesh[NOSE_TIP],
                     mesh[MOUTH_RIGHT], mesh[MOUTH_LEFT]]).astype(np.float32)


# -- iris refinement (MediaPipe's iris_landmark_left_and_right graph) --------------------------
IRIS_SIZE = 64
IRIS_SCALE = 2.3
# eye corners the eye crop is built from, image-left eye first: (start, end) of the level line
EYE_CORNERS = ((33, 133), (362, 263))
# Where the iris model's 71 eye-contour and brow points go in the mesh, image-left eye first
# (MediaPipe's UpdateFaceLandmarksCalculator table, in the model's output order).
EYE_REFINED = (
    (33, 7, 163, 144, 145, 153, 154, 155, 133, 246, 161, 160, 159, 158, 157, 173,
     130, 25, 110, 24, 23, 22, 26, 112, 243, 247, 30, 29, 27, 28, 56, 190,
     226, 31, 228, 229, 230, 231, 232, 233, 244, 113, 225, 224, 223, 222, 221, 189,
     35, 124, 46, 53, 52, 65, 143, 111, 117, 118, 119, 120, 121, 128, 245,
     156, 70, 63, 105, 66, 107, 55, 193),
    (263, 249, 390, 373, 374, 380, 381, 382, 362, 466, 388, 387, 386, 385, 384, 398,
     359, 255, 339, 254, 253, 252, 256, 341, 463, 467, 260, 259, 257, 258, 286, 414,
     446, 261, 448, 449, 450, 451, 452, 453, 464, 342, 445, 444, 443, 442, 441, 413,
     265, 353, 276, 283, 282, 295, 372, 340, 346, 347, 348, 349, 350, 357, 465,
     383, 300, 293, 334, 296, 336, 285, 417),
)


def eye_matrices(mesh: np.ndarray) -> list[np.ndarray]:
    """2x3 affines image -> 64x64 eye crop, image-left eye first; the image-right eye's crop is
    mirrored, since the model was trained on image-left eyes only."""
    out = []
    for k, (a, b) in enumerate(EYE_CORNERS):
        p, q = np.asarray(mesh[a, :2], np.float64), np.asarray(mesh[b, :2], np.float64)
        m = square_matrix((p + q) / 2, IRIS_SCALE * float(np.linalg.norm(q - p)), q - p, IRIS_SIZE)
        if k == 1:
            m = np.array([[-1.0, 0.0, IRIS_SIZE], [0.0, 1.0, 0.0]]) @ np.vstack([m, [0, 0, 1]])
        out.append(m)
    return out


def eye_crop(rgb: np.ndarray, m: np.ndarray) -> np.ndarray:
    out = cv2.warpAffine(rgb, m, (IRIS_SIZE, IRIS_SIZE), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return out.astype(np.float32) / 255.0


def apply_iris(mesh: np.ndarray, contours: Sequence[np.ndarray], matrices: Sequence[np.ndarray]) -> np.ndarray:
    """The (468, 2) mesh with both eyes' 71 points replaced by the iris model's ``contours``."""
    mesh = np.array(mesh[:, :2], np.float64)
    for table, contour, m in zip(EYE_REFINED, contours, matrices):
        mesh[list(table)] = to_image(np.asarray(contour).reshape(-1, 3), m)
    return mesh


def face_box(mesh: np.ndarray) -> np.ndarray:
    """x1, y1, x2, y2 of the mesh's 468 points (hairline to chin, cheek to cheek)."""
    p = np.asarray(mesh)[:, :2]
    return np.concatenate([p.min(0), p.max(0)]).astype(np.float32)
