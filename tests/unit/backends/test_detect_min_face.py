"""QA's re-detection windows search only for faces of the tracked face's size: MTCNN's pyramid cut
to its default's coarser levels (builtin_analyzer._pyramid_start) finds the same boxes for it."""
import numpy as np

from swapline_core.backends import builtin_models as bm
from swapline_core.backends.builtin_analyzer import _pyramid_start
from swapline_core.qa import redetect


def test_the_cut_pyramid_is_the_default_ones_coarser_levels():
    assert _pyramid_start(20, None) == _pyramid_start(20, 15) == 20
    start = _pyramid_start(20, redetect.WINDOW_MIN_FACE)
    levels = np.log(20 / start) / np.log(bm.MTCNN_FACTOR)
    assert abs(levels - round(levels)) < 1e-9 and round(levels) >= 1        # a level of the default
    assert start <= redetect.WINDOW_MIN_FACE < start / bm.MTCNN_FACTOR            # the largest one not above


def test_windows_find_the_tracked_face_as_the_full_pyramid_does(builtin_analyzer, kling_target, monkeypatch):
    frames, faces = kling_target
    tracked = [[f] for f in faces]
    cut = redetect.detect_around(builtin_analyzer, frames, tracked)
    monkeypatch.setattr(redetect, "WINDOW_MIN_FACE", None)
    full = redetect.detect_around(builtin_analyzer, frames, tracked)
    for tr, a, b in zip(tracked, cut, full):
        (ma,), (mb,) = redetect.match(tr, a, 0.3), redetect.match(tr, b, 0.3)
        assert ma is not None and mb is not None
        np.testing.assert_array_equal(ma.bbox, mb.bbox)
        np.testing.assert_array_equal(ma.kps, mb.kps)
    assert sum(map(len, cut)) <= sum(map(len, full))


def test_batches_on_two_threads_find_what_one_at_a_time_finds(builtin_analyzer, kling_target, monkeypatch):
    """BuiltinAnalyzer.detect runs its MTCNN batches of small images (QA's windows; the 350 px
    sample frames here) two at a time: every box, point and score (and every skipped face's
    record) is the one a single thread gives, batch by batch."""
    from swapline_core.backends import builtin_analyzer as ba

    frames, _ = kling_target
    images = frames * 5                                   # three batches of the analyzer's 8

    def run():
        found = builtin_analyzer.detect(images)
        return [[(f.bbox.tobytes(), f.kps.tobytes(), f.score) for f in fs] for fs in found], builtin_analyzer.skipped

    assert len(images) > 2 * builtin_analyzer.batch_size
    assert images[0].shape[0] * images[0].shape[1] <= ba.THREADED_MAX_PIXELS
    monkeypatch.setattr(ba, "DETECT_THREADS", 1)
    alone = run()
    monkeypatch.setattr(ba, "DETECT_THREADS", 2)
    assert run() == alone and any(alone[0])


def test_channels_last_max_pools_give_the_plain_mtcnns_boxes(kling_target):
    """The shared CPU MTCNN's max pools run on channels-last tensors (builtin_models._fast_max_pools):
    boxes, scores and points are bit-identical to facenet-pytorch's own model, on the sample's
    frames and on QA-window-sized and 720p-sized versions of them (all three nets, several pyramid levels)."""
    import cv2
    import torch
    from facenet_pytorch import MTCNN

    fast = bm.mtcnn()
    assert sum(type(m).__name__ == "ChannelsLastMaxPool" for net in (fast.pnet, fast.rnet, fast.onet)
               for m in net.children()) == 6      # PNet 1, RNet 2, ONet 3
    plain = MTCNN(keep_all=True, min_face_size=20.0, thresholds=[0.6, 0.7, 0.7], factor=bm.MTCNN_FACTOR,
                  device="cpu").train(False)
    frames, _ = kling_target

    def in_720p(f):
        canvas = np.zeros((720, 1280, 3), np.uint8)
        canvas[10:710, 300:1000] = cv2.resize(f, (700, 700))
        return canvas

    with torch.inference_mode():
        for resize in (lambda f: f, lambda f: cv2.resize(f, (320, 320)), in_720p):
            batch = np.stack([resize(f) for f in frames[:4]])
            got, want = fast.detect(batch, landmarks=True), plain.detect(batch, landmarks=True)
            assert all(b is not None for b in want[0])
            for g, w in zip(got, want):
                for gi, wi in zip(g, w):
                    assert (gi is None) == (wi is None)
                    if wi is not None:
                        np.testing.assert_array_equal(np.asarray(gi, np.float32), np.asarray(wi, np.float32))
