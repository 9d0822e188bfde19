"""Pixel boost: run a small swapper on sub-pixel-shifted samplings of a larger aligned crop.

A crop of ``boost`` px (a multiple k of the model size s) is split into k*k tiles of s px, tile
(a, b) taking every k-th pixel from row a, column b. Each tile is the whole face at the model's
resolution, shifted by a fraction of a model pixel, so each swapped tile fills its own pixels of
the large crop: reassembled, the result carries k*k times the samples of one 128/256 px pass.
"""
from __future__ import annotations

import numpy as np

BOOST_SIZES = (0, 256, 384, 512, 768, 1024)   # 0: off (the model's own size)


def boost_factor(model_size: int, boost: int) -> int:
    if not boost or boost <= model_size:
        return 1
    if boost % model_size:
        raise ValueError(f"pixel boost {boost} px is not a multiple of the swapper's {model_size} px; "
                         f"choose one of {[b for b in BOOST_SIZES if b and b % model_size == 0]}")
    return boost // model_size


def split(crops: np.ndarray, k: int) -> np.ndarray:
    """(M, k*s, k*s, C) -> (M*k*k, s, s, C), tiles of one crop consecutive, row-major in (a, b)."""
    if k == 1:
        return crops
    m, big, _, c = crops.shape
    s = big // k
    t = crops.reshape(m, s, k, s, k, c).transpose(0, 2, 4, 1, 3, 5)
    return t.reshape(m * k * k, s, s, c)


def merge(tiles: np.ndarray, k: int) -> np.ndarray:
    """Inverse of :func:`split`."""
    if k == 1:
        return tiles
    n, s, _, c = tiles.shape
    m = n // (k * k)
    t = tiles.reshape(m, k, k, s, s, c).transpose(0, 3, 1, 4, 2, 5)
    return t.reshape(m, s * k, s * k, c)
