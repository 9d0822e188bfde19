"""Temporal smoothing of mask evidence along each track, so a still face's mask does not flicker.

A face's map is the per-pixel median of its own map and those of the same track within +-N
frames (same shot), each warped onto it by the similarity between the faces' five keypoints.
Neighbours outside the chunk come from a pre-/post-roll read through ``ClipContext.read_frames``,
and every frame's evidence is computed from that frame alone: a chunk's masks are the same
whatever the chunk size and whether it runs in one go or after a resume. A median (not a mean)
drops a one-frame blip entirely and follows an occluder that stays.
"""
from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from ..faces.align import umeyama


def patch_affine(origin, scale: float = 1.0) -> np.ndarray:
    """frame -> map transform of a map covering a frame box from ``origin`` at ``scale``."""
    ox, oy = (float(v) for v in origin)
    return np.array([[scale, 0.0, -scale * ox], [0.0, scale, -scale * oy]], np.float64)


def _h(m: np.ndarray) -> np.ndarray:
    return np.vstack([np.asarray(m, np.float64), [0.0, 0.0, 1.0]])


def warp_between(src_map: np.ndarray, m_src: np.ndarray, src_kps: np.ndarray, dst_shape,
                 m_dst: np.ndarray, dst_kps: np.ndarray) -> np.ndarray:
    """Move one face's map (frame -> map transform ``m_src``) onto another face's map space,
    following the face (keypoints in frame coordinates); NaN where the source has no data."""
    return warp_by(src_map, between(m_src, src_kps, m_dst, dst_kps), dst_shape)


def between(m_src: np.ndarray, src_kps: np.ndarray, m_dst: np.ndarray, dst_kps: np.ndarray) -> np.ndarray:
    """The map -> map transform ``warp_between`` applies (float32 2x3): computed once, it moves
    every map of the same face pair (skin distance, glasses ring) with one keypoint fit."""
    t = umeyama(src_kps, dst_kps) if src_kps is not dst_kps else np.array([[1, 0, 0], [0, 1, 0]], np.float32)
    return (_h(m_dst) @ _h(t) @ np.linalg.inv(_h(m_src)))[:2].astype(np.float32)


def warp_by(src_map: np.ndarray, full: np.ndarray, dst_shape) -> np.ndarray:
    """``src_map`` moved by ``between``'s transform; NaN where the source has no data."""
    return cv2.warpAffine(np.asarray(src_map, np.float32), full, (dst_shape[1], dst_shape[0]),
                          flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=float("nan"))


def window(key, clip_index: int, pool_keys: Sequence, pool_index: Sequence[int], radius: int, shot_of) -> list[int]:
    """Pool entries of the same track within +-radius frames and the same shot."""
    if key is None or radius <= 0:
        return []
    shot = shot_of(clip_index)
    return [b for b, (k, i) in enumerate(zip(pool_keys, pool_index))
            if k == key and abs(i - clip_index) <= radius and shot_of(i) == shot]


def median(own: np.ndarray, others: Sequence[np.ndarray], scratch: bool = False) -> np.ndarray:
    """Per-pixel median of ``own`` and ``others`` (same shape); where a neighbour has no data
    (NaN, outside its map) it votes with ``own``: the NaN-aware median for 3-5 maps, cheaper.
    ``scratch``: ``others`` are float32 temporaries this call may overwrite (fewer copies)."""
    if not others:
        return own
    own32 = np.asarray(own, np.float32)
    if scratch:        # the caller's warped maps are its own temporaries: patch their NaNs in place
        maps = [own32] + [np.asarray(o, np.float32) for o in others]
        for o in maps[1:]:
            np.copyto(o, own32, where=np.isnan(o))
    else:
        maps = [own32] + [np.where(np.isnan(o), own, o).astype(np.float32, copy=False) for o in others]
    if len(maps) > 5:
        return np.median(np.stack(maps), axis=0).astype(np.float32)
    if len(maps) in (3, 5) and not np.isnan(own32).any():
        return _select_median(maps)
    # 2-5 maps (radius <= 2): sorted by compare-exchange, min/max in place of np.median's
    # partition over a stacked copy (same values, a third of the time).
    n = len(maps)
    for i in range(n):
        for j in range(n - 1 - i):
            lo = np.minimum(maps[j], maps[j + 1])
            maps[j + 1] = np.maximum(maps[j], maps[j + 1])
            maps[j] = lo
    if n % 2:
        return maps[n // 2]
    return ((maps[n // 2 - 1] + maps[n // 2]) / np.float32(2)).astype(np.float32)


def _select_median(maps: list[np.ndarray]) -> np.ndarray:
    """The middle of 3 or 5 NaN-free maps by selection (9 min/max for 5 instead of the sorting
    network's 20; the median is one of the inputs, so the value is the same either way), into
    two scratch maps: with many map-sized temporaries alive the allocator pages fresh memory in
    for each, which cost more than the arithmetic (measured: 190 page faults per call)."""
    if len(maps) == 5:
        a, b, c, d, x = maps
        # the middle two of a..d: neither the smallest nor the largest of four is the median of five
        y = np.minimum(a, b)
        tmp = np.minimum(c, d)
        np.maximum(y, tmp, out=y)
        z = np.maximum(a, b)
        np.maximum(c, d, out=tmp)
        np.minimum(z, tmp, out=z)
    else:
        x, y, z = maps
        y, z, tmp = y.copy(), z.copy(), np.empty_like(x)
    # max(min(x, y), min(max(x, y), z))
    np.minimum(x, y, out=tmp)
    np.maximum(x, y, out=y)
    np.minimum(y, z, out=y)
    np.maximum(tmp, y, out=tmp)
    return tmp
