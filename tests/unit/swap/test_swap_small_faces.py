"""Small faces (eyes under the swapper's declared minimum) are swapped through upscaled crops,
on the real sample clip scaled into a full-body-sized canvas, and nothing lands off the face."""
import cv2
import numpy as np
import pytest
from PIL import Image

from devtools.media import REPO  # noqa: F401  (repo-relative sample paths below)
from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
from swapline_core.backends.classical import ClassicalSwapper
from swapline_core.faces import identity as face_model
from swapline_core.guards import GuardOptions
from swapline_core.swap import upscale
from swapline_core.swap.chunk import SwapOptions, swap_chunk
from swapline_core.video.frames import FrameSequence

CLIP = REPO / "assets" / "samples" / "kling_avatar_clip.mp4"
SOURCE = REPO / "assets" / "samples" / "source_face.png"


@pytest.fixture(scope="module")
def setup():
    an = BuiltinAnalyzer()
    source = face_model.build_from_images(an, [np.array(Image.open(SOURCE).convert("RGB"))])
    frame = next(FrameSequence.open(str(CLIP), count=1, chunk=1).iter_chunks())[1][0]
    return an, source, frame


def _small_scene(frame, scale):
    canvas = np.full((720, 1280, 3), 110, np.uint8)
    small = cv2.resize(frame, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    y, x = 300, 700
    canvas[y:y + small.shape[0], x:x + small.shape[1]] = small
    return canvas


def test_small_face_is_swapped_through_an_upscaled_crop(setup):
    an, source, frame = setup
    swapper = ClassicalSwapper()
    img = _small_scene(frame, 0.17)          # a ~25 px face: eyes ~10 px apart, under the 12 px minimum
    faces = an.detect([img])[0]
    assert faces, "the detector should find the small face"
    face = max(faces, key=lambda f: f.area)
    assert upscale.MIN_EYES_PX <= upscale.eyes_px(face) < swapper.competence.min_inter_ocular_px
    res = swap_chunk(swapper, an, [img], [[face]], source, SwapOptions())
    rec = res.records[0][0]
    assert rec["status"] == "swapped" and rec.get("upscaled", 0) > 1, rec
    changed = np.abs(res.frames[0].astype(int) - img.astype(int)).max(-1) > 8
    assert changed.sum() > 50, "the small face should be visibly swapped"
    x1, y1, x2, y2 = face.bbox
    size = max(x2 - x1, y2 - y1)
    box = np.zeros_like(changed)
    box[int(y1 - 0.6 * size):int(y2 + 0.3 * size), int(x1 - 0.3 * size):int(x2 + 0.3 * size)] = True
    assert not (changed & ~box).any(), "pixels changed off the face"
    # without the upscale path (guards off the face is swapped at frame scale; with guards on and a
    # minimum that cannot be reached it is refused): the record says why
    tiny = _small_scene(frame, 0.1)
    fs = an.detect([tiny])[0]
    if fs:
        r = swap_chunk(swapper, an, [tiny], [fs[:1]], source, SwapOptions()).records[0][0]
        assert r["status"] == "skipped" or r.get("upscaled"), r


def test_guards_off_leaves_the_small_face_at_frame_scale(setup):
    an, source, frame = setup
    img = _small_scene(frame, 0.17)
    face = max(an.detect([img])[0], key=lambda f: f.area)
    res = swap_chunk(ClassicalSwapper(), an, [img], [[face]], source,
                     SwapOptions(guards=GuardOptions(enabled=False)))
    assert "upscaled" not in res.records[0][0]
