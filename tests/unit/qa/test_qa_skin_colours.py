"""The gate's reference skin colours and its occluder estimate, computed the fast way (1-D bin
keys, a k-d tree), equal the plain definitions: every pixel against every bin of the reference."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import cv2  # noqa: E402
import numpy as np  # noqa: E402

from swapline_core.qa import metrics_image as mi  # noqa: E402


def _lab_face(seed: int):
    """A 160 px face-like crop: two skin tones, dark frames and noise, with a 68-point ring."""
    rng = np.random.default_rng(seed)
    img = np.empty((160, 160, 3), np.uint8)
    img[:] = (200, 150, 125)
    img[:, 80:] = (140, 95, 80)                         # shaded half
    cv2.rectangle(img, (30, 55), (130, 70), (30, 20, 20), 6)     # a frame across the face
    img = np.clip(img + rng.normal(0, 5, img.shape), 0, 255).astype(np.uint8)
    t = np.linspace(0, 2 * np.pi, 68, endpoint=False)
    lm = np.stack([80 + 60 * np.cos(t), 85 + 65 * np.sin(t)], 1).astype(np.float32)
    return mi.lab(img), lm


def test_skin_colours_and_occluder_match_the_plain_definitions():
    for seed in range(3):
        lab, lm = _lab_face(seed)
        reg = mi.face_regions(lab.shape[:2], lm)
        ref = reg["hull"] & ~reg["features"]
        ref[:, 75:] = False                   # the lit half is the reference: the frame and the shade are not
        px = lab[ref]
        q = np.floor(px / mi.REF_BIN).astype(np.int32)
        bins, counts = np.unique(q, axis=0, return_counts=True)
        plain = (bins[counts >= max(2, mi.REF_MIN_SHARE * len(px))].astype(np.float32) + 0.5) * mi.REF_BIN
        colours = mi.skin_colours(lab, ref)
        assert np.array_equal(colours, plain)

        occ = mi.estimate_occluder(lab, reg, colours=colours)
        cand = reg["hull"] & ~reg["features"]
        d = np.linalg.norm(lab[cand][:, None, :] - colours[None], axis=-1).min(axis=1)
        want = np.zeros(ref.shape, np.uint8)
        want[cand] = d > mi.SKIN_DE
        want = cv2.morphologyEx(want, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8)).astype(bool)
        assert want.any() and np.array_equal(occ, want)
