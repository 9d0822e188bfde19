"""Sunlit skin is not an occluder (``occlusion._glare``): a highlight whose light fades in stays
swappable while a bright object with a sharp edge stays cut. On the kling clip the sunlit
forehead was cut as an occluder and the target's pale skin showed through the swap as a blob;
the bright objects composited onto the real clip are in test_mask_stack.py."""
from __future__ import annotations

import cv2
import numpy as np

from swapline_core.masks import occlusion as occ

SKIN = (205, 150, 125)      # a lit skin tone, RGB


def _face(size=128):
    """A skin-coloured map with a soft highlight (left) and a sharp white disc (right), both
    reaching the top edge like a forehead's hairline; returns the image and both centres."""
    img = np.empty((size, size, 3), np.float32)
    img[:] = SKIN
    ys, xs = np.mgrid[0:size, 0:size].astype(np.float32)
    glow = np.exp(-((xs - 36) ** 2 + (ys - 14) ** 2) / (2 * 12.0 ** 2))[..., None]
    img = img * (1 - glow) + np.float32(250) * glow          # light fades in over ~12 px
    cv2.circle(img, (92, 12), 14, (250, 250, 250), -1)     # an object: a step at its edge
    rng = np.random.default_rng(0)
    img = np.clip(img + rng.normal(0, 1.5, img.shape), 0, 255).astype(np.uint8)
    return img, (14, 36), (12, 92)


def _masks(img, with_light: bool):
    lab = occ.lab(img)
    model = occ.fit_skin(lab[70:120, 10:118].reshape(-1, 3))
    d2 = model.distance2(lab.reshape(-1, 3)).reshape(lab.shape[:2])
    inside, zones = np.ones(d2.shape, bool), np.zeros(d2.shape, bool)
    if not with_light:
        return occ.occluder_mask(d2, inside, zones)
    return occ.occluder_mask(d2, inside, zones, light=occ.Light(lab[..., 0], float(model.means[:, 0].max())))


def test_soft_highlight_is_swapped_and_a_white_object_is_not():
    img, glare, disc = _face()
    plain = _masks(img, with_light=False)
    assert plain[glare] and plain[disc]        # the colour model alone cuts both
    judged = _masks(img, with_light=True)
    assert not judged[glare]
    assert judged[disc]
    assert judged.sum() >= 0.8 * np.pi * 14 ** 2 / 2      # the half disc inside the map, still whole


def test_a_darker_blob_is_never_glare():
    img, _, _ = _face()
    img[40:60, 0:30] = (60, 40, 35)            # dark hair over the temple, its edge blurred
    img[40:60, 0:30] = cv2.GaussianBlur(img, (0, 0), 6)[40:60, 0:30]
    assert _masks(img, with_light=True)[50, 5]
