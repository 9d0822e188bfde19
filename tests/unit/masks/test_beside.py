"""The background beside a turned face is not a skin tone (``masks.beside``).

On the development set's guitarist (api_luma_ray3_2_video_edit-1, frames 12-17) the head turns
and its far cheek's jaw points land on the sunlit orchard behind him; the leaves' olive became one
of the skin model's tones, and the swap was painted past his cheek over the leaves (issue 30: the
generalization bench's off-face frames 14 and 15). Judged by the bench's independent scorer (dlib
HOG + 68 points, not the pipeline's MTCNN path)."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from ltx_swap import SOURCE  # noqa: E402
from PIL import Image  # noqa: E402

from swapline_core.masks import beside  # noqa: E402

CLIP = "api_luma_ray3_2_video_edit-1"


def _lab(rgb):
    return cv2.cvtColor(np.array([[rgb]], np.uint8), cv2.COLOR_RGB2Lab).astype(np.float32)[0, 0] * [100 / 255, 1, 1] \
        - [0, 128, 128]


def _face(background):
    """A 120 px Lab map: a skin disc with 68 points on a circle inside it, ``background`` around."""
    rng = np.random.default_rng(3)
    lab = np.empty((120, 120, 3), np.float32)
    lab[:] = _lab(background)
    yy, xx = np.mgrid[:120, :120]
    disc = (yy - 60) ** 2 + (xx - 60) ** 2 < 40 ** 2
    lab[disc] = _lab((170, 120, 95))
    lab += rng.normal(0, 0.5, lab.shape).astype(np.float32)
    t = np.linspace(0, 2 * np.pi, 68, endpoint=False)
    lm = np.stack([60 + 38 * np.cos(t), 60 + 38 * np.sin(t)], 1).astype(np.float32)
    lm[36:48, 1], lm[48:60, 1] = 50.0, 80.0          # eye and lip rows: the band is rows 50-80
    nose = np.zeros(disc.shape, bool)
    nose[55:75, 55:65] = True
    return lab, disc, nose, lm


def test_background_samples_dropped_skin_like_background_kept():
    lab, disc, nose, lm = _face((120, 125, 40))            # olive leaves
    samples = disc.copy()
    samples[50:80, 96:101] = True                           # a cheek polygon reaching past the silhouette
    keep = beside.not_background(lab, samples, nose, lm)
    outside = ~disc[samples]
    assert outside.any() and not keep[outside].any(), "leaves beside the face kept as skin samples"
    assert keep[~outside].all(), "skin samples dropped"
    # a warm wall of the skin's own colour: its samples match the nose as well and stay
    lab, disc, nose, lm = _face((172, 121, 96))
    assert beside.not_background(lab, samples, nose, lm).all()


@pytest.fixture(scope="module")
def guitarist(tmp_path_factory):
    from bench.generalization import devset, metrics
    from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
    from swapline_core.backends.classical import ClassicalSwapper
    from swapline_core.faces import identity as face_model
    from swapline_core.masks import MaskOptions
    from swapline_core.swap.chunk import SwapOptions
    from swapline_core.video import stages as pipeline
    from swapline_core.video.frames import FrameSequence

    clip = next(c for c in devset.CLIPS if c.name == CLIP)
    path = devset.fetch_clips([clip])[0]
    store = tmp_path_factory.mktemp("guitarist")
    analyzer = BuiltinAnalyzer()
    source = face_model.build_from_images(analyzer, [np.array(Image.open(SOURCE).convert("RGB"))])
    seq = FrameSequence.open(str(path), start=8, count=12, chunk=12)
    frames = [f for _, ch in seq.iter_chunks() for f in ch]
    faces, _ = pipeline.track_faces(seq, analyzer, str(store / "t"), pipeline.Hooks(), mode="largest", max_faces=1)
    out, _ = pipeline.swap_frames(seq, faces, source, ClassicalSwapper(), analyzer, str(store / "s"),
                                  pipeline.Hooks(), SwapOptions(masks=MaskOptions()))
    res = [f for _, ch in out.iter_chunks() for f in ch]
    return metrics.ClipTruth(frames), res


def test_turned_face_not_pasted_over_the_background(guitarist):
    from bench.generalization import metrics
    truth, res = guitarist
    swapped = [i for i, (a, b) in enumerate(zip(truth.frames, res)) if not np.array_equal(a, b)]
    assert len(swapped) >= 10, f"the guitarist should be swapped on nearly every frame, was on {swapped}"
    off = metrics.off_face(truth, res)
    assert off["off_face_unjudged"] == 0
    assert off["off_face_frames"] == 0, f"swap pasted over the background beside the face on frames {off}"
