"""Paste-back: feathered masks in crop space, crops warped back to frame patches, blending.

Everything works on a patch around the face, never on full-frame float buffers, and blending
writes only where the mask is non-zero so pixels outside the paste mask stay bit-identical.
"""
from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from ..types import SwapPatch
from .align import invert, transform_points

MASK_KINDS = ("ellipse", "hull")


def crop_mask(size: int, kind: str = "ellipse", points: np.ndarray | None = None,
              erode: float = 0.0, blur: float = 0.1) -> np.ndarray:
    """A soft mask in aligned-crop space. ``erode``/``blur`` are fractions of the crop size."""
    m = np.zeros((size, size), np.uint8)
    if kind == "hull" and points is not None and len(points) >= 3:
        hull = cv2.convexHull(np.round(points).astype(np.int32))
        cv2.fillConvexPoly(m, hull, 255)
    else:
        # ArcFace-template crops put the face centre slightly below the middle.
        centre = (size // 2, int(size * 0.54))
        axes = (int(size * 0.38), int(size * 0.46))
        cv2.ellipse(m, centre, axes, 0, 0, 360, 255, -1)
    e = int(round(erode * size))
    if e > 0:
        m = cv2.erode(m, np.ones((2 * e + 1, 2 * e + 1), np.uint8))
    mf = m.astype(np.float32) / 255.0
    b = int(round(blur * size))
    if b > 0:
        # Blur only inwards: erode by the blur radius first so the feather never leaks outside.
        mf = cv2.erode(mf, np.ones((b + 1, b + 1), np.uint8))
        k = 2 * b + 1
        mf = cv2.GaussianBlur(mf, (k, k), 0)
        mf[m == 0] = 0.0
    return mf


def crop_to_patch(frame_hw: tuple[int, int], pixels: np.ndarray, mask: np.ndarray,
                  m: np.ndarray, info: dict | None = None) -> SwapPatch | None:
    """Warp an aligned crop (frame->crop transform ``m``) back into a frame-space patch."""
    h, w = frame_hw
    s = pixels.shape[0]
    im = invert(m)
    corners = transform_points(np.array([[0, 0], [s, 0], [0, s], [s, s]], np.float32), im)
    x0 = max(int(np.floor(corners[:, 0].min())) - 1, 0)
    y0 = max(int(np.floor(corners[:, 1].min())) - 1, 0)
    x1 = min(int(np.ceil(corners[:, 0].max())) + 1, w)
    y1 = min(int(np.ceil(corners[:, 1].max())) + 1, h)
    if x1 <= x0 or y1 <= y0:
        return None
    im_local = im.copy()
    im_local[:, 2] -= (x0, y0)
    size = (x1 - x0, y1 - y0)
    px = cv2.warpAffine(pixels.astype(np.float32), im_local, size, flags=cv2.INTER_LINEAR,
                        borderMode=cv2.BORDER_REPLICATE)
    mk = cv2.warpAffine(mask.astype(np.float32), im_local, size, flags=cv2.INTER_LINEAR,
                        borderMode=cv2.BORDER_CONSTANT, borderValue=0.0)
    mk = np.clip(mk, 0.0, 1.0)
    # Weights below ~1.5/255 cannot move a pixel visibly, but would make "outside the mask" (as an
    # 8-bit mask reports it) differ from "untouched": zero them so the two always agree.
    mk[mk < 1.5 / 255.0] = 0.0
    return SwapPatch((x0, y0, x1, y1), px, mk, dict(info or {}))


def color_match(pixels: np.ndarray, original: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Reinhard mean/std transfer in LAB, measured inside the mask, so skin tone follows the target."""
    sel = mask > 0.5
    if sel.sum() < 16:
        return pixels
    src = cv2.cvtColor(np.clip(pixels, 0, 255).astype(np.uint8), cv2.COLOR_RGB2LAB).astype(np.float32)
    dst = cv2.cvtColor(original.astype(np.uint8), cv2.COLOR_RGB2LAB).astype(np.float32)
    s_mu, s_sd = src[sel].mean(0), src[sel].std(0) + 1e-3
    d_mu, d_sd = dst[sel].mean(0), dst[sel].std(0) + 1e-3
    out = (src - s_mu) * (d_sd / s_sd) + d_mu
    out = np.clip(out, 0, 255).astype(np.uint8)
    return cv2.cvtColor(out, cv2.COLOR_LAB2RGB).astype(np.float32)


def apply_patches(frame: np.ndarray, patches: Sequence[SwapPatch], color: bool = False) -> np.ndarray:
    """Blend patches into a copy of ``frame`` (uint8 RGB); untouched where every mask is 0."""
    out = frame.copy()
    for p in patches:
        x0, y0, x1, y1 = p.region
        sub = out[y0:y1, x0:x1]
        px = color_match(p.pixels, sub, p.mask) if color else p.pixels
        m = p.mask[..., None]
        blended = sub.astype(np.float32) * (1.0 - m) + px * m
        sel = p.mask > 0
        sub[sel] = np.clip(np.rint(blended[sel]), 0, 255).astype(np.uint8)
    return out


def union_mask(frame_hw: tuple[int, int], patches: Sequence[SwapPatch]) -> np.ndarray:
    out = np.zeros(frame_hw, np.float32)
    for p in patches:
        x0, y0, x1, y1 = p.region
        np.maximum(out[y0:y1, x0:x1], p.mask, out=out[y0:y1, x0:x1])
    return out
