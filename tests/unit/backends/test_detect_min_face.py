"""QA's re-detection windows search only for faces of the tracked face's size: MTCNN's pyramid cut
to its default's coarser levels (builtin_analyzer._pyramid_start) finds the same boxes for it."""
import numpy as np

from swapline_core.backends import builtin_models as bm
from swapline_core.backends.builtin_analyzer import _pyramid_start
from swapline_core.qa import gate


def test_the_cut_pyramid_is_the_default_ones_coarser_levels():
    assert _pyramid_start(20, None) == _pyramid_start(20, 15) == 20
    start = _pyramid_start(20, gate.WINDOW_MIN_FACE)
    levels = np.log(20 / start) / np.log(bm.MTCNN_FACTOR)
    assert abs(levels - round(levels)) < 1e-9 and round(levels) >= 1        # a level of the default
    assert start <= gate.WINDOW_MIN_FACE < start / bm.MTCNN_FACTOR            # the largest one not above


def test_windows_find_the_tracked_face_as_the_full_pyramid_does(builtin_analyzer, kling_target, monkeypatch):
    frames, faces = kling_target
    tracked = [[f] for f in faces]
    cut = gate._detect_around(builtin_analyzer, frames, tracked)
    monkeypatch.setattr(gate, "WINDOW_MIN_FACE", None)
    full = gate._detect_around(builtin_analyzer, frames, tracked)
    for tr, a, b in zip(tracked, cut, full):
        (ma,), (mb,) = gate._match(tr, a, 0.3), gate._match(tr, b, 0.3)
        assert ma is not None and mb is not None
        np.testing.assert_array_equal(ma.bbox, mb.bbox)
        np.testing.assert_array_equal(ma.kps, mb.kps)
    assert sum(map(len, cut)) <= sum(map(len, full))
