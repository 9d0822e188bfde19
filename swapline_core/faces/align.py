"""Similarity alignment of faces onto canonical templates, and the transforms back.

Our own Umeyama estimate (not skimage's) so alignment does not depend on an API that
scikit-image keeps deprecating; results match insightface's ``norm_crop`` to float precision.
"""
from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from ..types import Face

# ArcFace's five-point template for 112x112 crops (insightface face_align.arcface_dst).
ARCFACE_112 = np.array([[38.2946, 51.6963], [73.5318, 51.5014], [56.0252, 71.7366],
                        [41.5493, 92.3655], [70.7299, 92.2041]], dtype=np.float32)
# FFHQ template for 512x512 crops: what GFPGAN/CodeFormer were trained on.
FFHQ_512 = np.array([[192.98138, 239.94708], [318.90277, 240.1936], [256.63416, 314.01935],
                     [201.26117, 371.41043], [313.08905, 371.15118]], dtype=np.float32)
CROP_SIZES = (112, 128, 256, 512)


def template(size: int, kind: str = "arcface") -> np.ndarray:
    if kind == "ffhq":
        return FFHQ_512 * (size / 512.0)
    # insightface's rule: multiples of 112 scale the template, others (128, 256, 512) scale by
    # size/128 and shift right by 8*ratio, matching how inswapper's 128 crops were made.
    if size % 112 == 0:
        return ARCFACE_112 * (size / 112.0)
    ratio = size / 128.0
    t = ARCFACE_112 * ratio
    t[:, 0] += 8.0 * ratio
    return t


def umeyama(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Least-squares similarity transform (rotation, uniform scale, translation) src -> dst, 2x3."""
    src = np.asarray(src, np.float64)
    dst = np.asarray(dst, np.float64)
    n = src.shape[0]
    mu_s, mu_d = src.mean(0), dst.mean(0)
    s_c, d_c = src - mu_s, dst - mu_d
    cov = d_c.T @ s_c / n
    u, sig, vt = np.linalg.svd(cov)
    d = np.ones(2)
    if np.linalg.det(cov) < 0:
        d[-1] = -1
    r = u @ np.diag(d) @ vt
    var_s = (s_c ** 2).sum() / n
    scale = (sig * d).sum() / var_s if var_s > 0 else 1.0
    t = mu_d - scale * r @ mu_s
    return np.hstack([scale * r, t[:, None]]).astype(np.float32)


def estimate_norm(kps: np.ndarray, size: int, kind: str = "arcface") -> np.ndarray:
    return umeyama(kps, template(size, kind))


def invert(m: np.ndarray) -> np.ndarray:
    return cv2.invertAffineTransform(np.asarray(m, np.float32))


def warp_crops(image: np.ndarray, faces: Sequence[Face], size: int,
               kind: str = "arcface") -> tuple[np.ndarray, np.ndarray]:
    """Aligned crops (M, size, size, 3) uint8 and their frame->crop transforms (M, 2, 3)."""
    crops = np.zeros((len(faces), size, size, 3), np.uint8)
    mats = np.zeros((len(faces), 2, 3), np.float32)
    for i, f in enumerate(faces):
        m = estimate_norm(f.kps, size, kind)
        crops[i] = cv2.warpAffine(image, m, (size, size), flags=cv2.INTER_LINEAR,
                                  borderMode=cv2.BORDER_REPLICATE)
        mats[i] = m
    return crops, mats


def transform_points(points: np.ndarray, m: np.ndarray) -> np.ndarray:
    p = np.asarray(points, np.float32)
    return p @ m[:, :2].T + m[:, 2]
