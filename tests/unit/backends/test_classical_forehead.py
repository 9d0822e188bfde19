"""The classical swap's forehead band meets the target's forehead without a dark rim.

The band's edge crosses the hairline; the Poisson clone takes its boundary from the target, so
with the real target there the pasted forehead was pulled toward the hair (the kling clip's
band ran 5-12 L levels darker than the target's forehead along its edge). Measured on real
frames of the kling clip with Tom Hanks as the source; the same frames without the edge match
show the old rim, so the test can fail. The same holds around a hole cut in the paste for the
source's hair, where the target's own lit forehead shows through (the development set's bride).
"""
from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from swapline_core.backends import classical, classical_blend
from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
from swapline_core.backends.classical import ClassicalSwapper
from swapline_core.faces.paste import apply_patches
from swapline_core.types import SourceIdentity

KLING = REPO / "tests" / ".cache" / "media" / "api_kling_avatar2-1.webp"
FRAMES = (3, 18, 33, 50)


@pytest.fixture(scope="module")
def setup():
    from devtools.media import HANKS, insightface_image, rgb
    from swapline_core.video.read import iter_frames

    if not KLING.is_file():
        pytest.fail(f"{KLING} missing: run scripts/setup.sh (it fetches the sample clips into tests/.cache/media)")
    analyzer = BuiltinAnalyzer()
    frames = [f for i, (_, f) in enumerate(iter_frames(KLING)) if i in FRAMES]
    faces = analyzer.detect(frames)
    analyzer.landmarks68(frames, faces)
    img = rgb(insightface_image(HANKS))
    f = analyzer.detect([img])[0][0]
    analyzer.landmarks68([img], [[f]])
    return frames, [fs[0] for fs in faces], SourceIdentity(np.zeros(128, np.float32), analyzer.recognizer_name, img, f)


def rim_step(frames, faces, source, reach: float = 0.08, lit: int = 140, blur: float = 3.0,
             min_px: int = 50, cut: bool = False) -> float:
    """Mean signed L difference (swapped minus target, 8-bit Lab, ``blur`` px blur) on the target's
    lit forehead skin (L > ``lit``) within ``reach`` of the face size inside the pasted edge, above
    the brows. ``cut``: the source's hair must have been cut from the paste (the hole's case)."""
    steps = []
    for frame, face in zip(frames, faces):
        p = ClassicalSwapper().swap([frame], [[face]], source)[0]
        if cut:
            assert p[0].info["source_occluded"] > 0.05, "the source's curl is no longer cut: the case is gone"
        out = apply_patches(frame, p)
        x0, y0, x1, y1 = p[0].region
        size = p[0].info["face_size_px"]
        dist = cv2.distanceTransform((p[0].mask > 0).astype(np.uint8), cv2.DIST_L2, 5)
        lt = cv2.cvtColor(frame[y0:y1, x0:x1], cv2.COLOR_RGB2Lab)[..., 0].astype(np.float32)
        lr = cv2.cvtColor(out[y0:y1, x0:x1], cv2.COLOR_RGB2Lab)[..., 0].astype(np.float32)
        above = (np.arange(y1 - y0)[:, None] + y0) < face.landmarks[17:27, 1].min()
        ring = (dist > 1) & (dist < reach * size) & above & (lt > lit)
        assert ring.sum() > min_px
        steps.append(float(cv2.GaussianBlur(lr - lt, (0, 0), blur)[ring].mean()))
    return float(np.mean(steps))


def test_forehead_band_edge_is_not_pulled_toward_the_hair(setup, monkeypatch):
    now = rim_step(*setup)
    monkeypatch.setattr(classical, "forehead_skin", lambda *a: None)
    monkeypatch.setattr(classical, "FOREHEAD_RELIGHT", classical.ClassicalSwapper().relight)
    old = rim_step(*setup)
    # Measured: -9.5 without the edge match and the forehead's finer relight, -3.9 with both
    # (-4.9 with the edge match alone).
    assert old < -7.5, old             # the rim this fixes is there without it
    assert now > -6.5, (now, old)
    assert now > old + 3.0, (now, old)


def test_forehead_edge_matches_skin_near_the_edge_only_above_the_brows():
    from swapline_core.faces.shape import MEAN68

    pts = (MEAN68 * 80 + (200, 120)).astype(np.float32)     # a ~200 px face in a 400 px patch
    skin = np.array((225.0, 190.0, 175.0), np.float32)
    patch = np.full((400, 400, 3), skin, np.float32)
    top = int(pts[17:27, 1].min())
    patch[: top - 25] = (70.0, 40.0, 30.0)                   # dark hair over the upper forehead
    hull = np.zeros((400, 400), np.uint8)
    band = np.concatenate([pts, pts[17:27] + 0.3 * (pts[36:48].mean(0) - pts[8])])
    cv2.fillConvexPoly(hull, cv2.convexHull(np.rint(band).astype(np.int32)), 1)
    cloned = patch.copy()
    cloned[hull > 0] = skin - 20.0                            # a paste pulled 20 levels darker
    info = classical_blend.forehead_skin(patch, hull, pts, 200.0)
    out = classical_blend.forehead_edge(cloned, patch, hull, 200.0, info)
    low = int(np.ceil(pts[17:27, 1].max())) + 1
    assert np.array_equal(out[low:], cloned[low:])            # below the brows: untouched
    dist = cv2.distanceTransform(hull, cv2.DIST_L2, 5)
    rim = (dist > 1) & (dist < 6) & (np.arange(400)[:, None] < low) & (np.arange(400)[:, None] > top - 20)
    deep = (dist > 0.2 * 200) & (np.arange(400)[:, None] < low)
    assert rim.any() and deep.any()
    assert np.abs(out[rim] - skin).mean() < 5.0               # the rim meets the target's skin
    assert np.array_equal(out[deep], cloned[deep])            # the band's inside stays the paste


HAPPYHORSE = "api_happyhorse1_1_t2v-1"
COLOUR_SOURCE = REPO / "assets" / "samples" / "source_face_colour.png"


def hole_step() -> float:
    """Mean signed L difference (``rim_step``) on the development set's frontal bride
    (api_happyhorse1_1_t2v-1, frames 0/7/15/23, face ~62 px) swapped with the shipped colour
    source, whose curl over the forehead is cut from the paste: the target's lit forehead shows
    through the hole, and the paste around it must meet it."""
    from PIL import Image

    from bench.generalization import devset

    # the development set is fetched on first use (tests/unit/masks/test_beside.py does the same)
    path = devset.fetch_clips([next(c for c in devset.CLIPS if c.name == HAPPYHORSE)])[0]
    analyzer = BuiltinAnalyzer()
    img = np.asarray(Image.open(COLOUR_SOURCE).convert("RGB"))
    f = analyzer.detect([img])[0][0]
    analyzer.landmarks68([img], [[f]])
    source = SourceIdentity(np.zeros(128, np.float32), analyzer.recognizer_name, img, f)
    clip = Image.open(path)
    frames = []
    for i in (0, 7, 15, 23):
        clip.seek(i)
        frames.append(np.asarray(clip.convert("RGB")))
    faces = analyzer.detect(frames)
    analyzer.landmarks68(frames, faces)
    big = [max(fs, key=lambda x: x.bbox[2] - x.bbox[0]) for fs in faces]
    return rim_step(frames, big, source, reach=0.12, lit=170, blur=1.5, min_px=20, cut=True)


def test_paste_meets_the_forehead_showing_through_a_cut_curl(monkeypatch):
    now = hole_step()
    monkeypatch.setattr(classical, "forehead_edge", lambda cloned, *a, **k: cloned)
    monkeypatch.setattr(classical, "FOREHEAD_RELIGHT", classical.ClassicalSwapper().relight)
    old = hole_step()
    # Measured: -12.3 before the edge match ran on what is pasted (clone_drift chose the plain
    # warp on these frames, and the match was applied to the clone only), -12.5 without it and
    # the forehead's finer relight, -7.9 with the match alone, -5.3 with both.
    assert old < -11.0, old            # the step this fixes is there without the match
    assert now > -7.0, (now, old)
    assert now > old + 3.0, (now, old)
