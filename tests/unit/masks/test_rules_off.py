"""A skin-sample rule that switches itself off says so in the face's record (issue 50, item 6).

``chroma.plausible`` (colours skin never has) and ``beside.not_background`` (the background
past a turned cheek) keep every sample when they would drop half or more: under coloured light,
on an unusual face. Right, but it was silent; now each face's ``masks`` record carries
``skin_rules_off``: {rule: why}.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from test_beside import _face, _lab  # noqa: E402

from swapline_core.masks import beside, chroma, rules_off  # noqa: E402

SAMPLE = ROOT / "assets" / "samples" / "kling_avatar_clip.mp4"


def _skin_and_blue(n_skin: int, n_blue: int) -> np.ndarray:
    rng = np.random.default_rng(1)
    skin = [_lab((150 + d, 100 + d, 75 + d)) for d in rng.integers(-30, 30, n_skin)]
    blue = [_lab((60 + d, 90 + d, 200)) for d in rng.integers(-10, 10, n_blue)]
    return np.stack(skin + blue)


def test_plausible_notes_when_it_keeps_everything():
    with rules_off.collecting() as notes:
        assert not chroma.plausible(_skin_and_blue(300, 40)).all()     # the rule works: no note
    assert notes == {}
    with rules_off.collecting() as notes:
        assert chroma.plausible(_skin_and_blue(40, 300)).all()         # blue light: all kept
    assert "88 %" in notes["chroma.plausible"] and "all kept" in notes["chroma.plausible"], notes
    chroma.plausible(_skin_and_blue(40, 300))                          # nobody collecting: no error


def test_not_background_notes_when_it_keeps_everything():
    lab, disc, nose, lm = _face((120, 125, 40))                         # olive leaves around a skin disc
    few = disc.copy()
    few[50:80, 96:101] = True                                           # a few samples past the silhouette
    with rules_off.collecting() as notes:
        assert not beside.not_background(lab, few, nose, lm).all()
    assert notes == {}
    most = nose.copy()
    most[50:80, 101:118] = True                                         # most samples on the leaves
    with rules_off.collecting() as notes:
        assert beside.not_background(lab, most, nose, lm).all()
    assert "beside.not_background" in notes and "none dropped" in notes["beside.not_background"], notes


@pytest.fixture(scope="module")
def swapped_under_blue_light():
    """The shipped sample's frames 0-1 swapped by the classical swapper, guards off: frame 0 as
    it is, frame 1 under a strong blue light (most skin samples blue), faces found on the clean frames."""
    from ltx_swap import SOURCE
    from PIL import Image

    from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
    from swapline_core.backends.classical import ClassicalSwapper
    from swapline_core.faces import identity as face_model
    from swapline_core.guards import GuardOptions
    from swapline_core.masks import MaskOptions
    from swapline_core.swap.chunk import SwapOptions, swap_chunk
    from swapline_core.video.frames import FrameSequence

    analyzer = BuiltinAnalyzer()
    source = face_model.build_from_images(analyzer, [np.array(Image.open(SOURCE).convert("RGB"))])
    clean = [f for _, ch in FrameSequence.open(str(SAMPLE), start=0, count=2, chunk=2).iter_chunks() for f in ch]
    found = [fs[:1] for fs in analyzer.detect(clean)]
    assert all(found), "the sample clip's first frames each show a face"
    analyzer.landmarks68(clean, found)
    blue = clean[1].astype(np.float32) * (0.35, 0.45, 1.0) + (0, 0, 60)
    frames = [clean[0], np.clip(blue, 0, 255).astype(np.uint8)]
    return swap_chunk(ClassicalSwapper(), analyzer, frames, [[fs[0].copy()] for fs in found], source,
                      SwapOptions(masks=MaskOptions(), guards=GuardOptions(enabled=False)))


def test_the_face_record_says_which_rule_switched_off(swapped_under_blue_light):
    res = swapped_under_blue_light
    plain, lit = res.records[0][0], res.records[1][0]
    assert plain["status"] == lit["status"] == "swapped"
    assert "skin_rules_off" not in plain["masks"], plain["masks"]
    off = lit["masks"]["skin_rules_off"]
    assert "chroma.plausible" in off and "all kept" in off["chroma.plausible"], off
