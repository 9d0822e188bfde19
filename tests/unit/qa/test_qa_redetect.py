"""QA's re-detection windows: a mirrored view maps back onto the same face (real MTCNN, real photo)."""
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from swapline_core.faces.tracking import iou
from swapline_core.qa import redetect

ROOT = Path(__file__).resolve().parents[3]
PHOTO = ROOT / "assets" / "samples" / "target_reference.png"


# ``analyzer``: conftest.py


@pytest.fixture(scope="module")
def photo_and_face(analyzer):
    img = np.array(Image.open(PHOTO).convert("RGB"))
    faces = analyzer.detect([img])[0]
    assert faces, f"no face found in {PHOTO}"
    return img, faces[0]


def test_mirrored_window_maps_back_onto_the_face(analyzer, photo_and_face):
    img, face = photo_and_face
    direct, mirrored = (redetect.detect_around(analyzer, [img], [[face]], [(redetect.WINDOW_SCALE, m)])[0]
                        for m in (False, True))
    assert direct and mirrored, (direct, mirrored)
    d, m = direct[0], max(mirrored, key=lambda f: iou(f.bbox, face.bbox))
    assert iou(d.bbox, m.bbox) > 0.85, (d.bbox, m.bbox)
    size = float(face.bbox[3] - face.bbox[1])
    # same points in the same order: the image-left eye stays first, the mouth corners likewise
    assert np.abs(d.kps - m.kps).max() < 0.08 * size, (d.kps, m.kps)
    assert m.kps[0, 0] < m.kps[1, 0] and m.kps[3, 0] < m.kps[4, 0]


def test_several_views_go_in_one_batch_and_all_report(analyzer, photo_and_face):
    img, face = photo_and_face
    views = [(redetect.RETRY_WINDOW_SCALE, False), (redetect.WINDOW_SCALE, True)]
    found = redetect.detect_around(analyzer, [img], [[face]], views)[0]
    assert len([f for f in found if iou(f.bbox, face.bbox) > 0.5]) == 2, [f.bbox for f in found]


def test_a_blank_window_finds_nothing_in_any_view(analyzer, photo_and_face):
    img, face = photo_and_face
    blank = np.full_like(img, 128)
    views = [(redetect.WINDOW_SCALE, False), (redetect.RETRY_WINDOW_SCALE, False), (redetect.WINDOW_SCALE, True)]
    assert redetect.detect_around(analyzer, [blank], [[face]], views) == [[]]


def test_refine_reads_the_face_at_its_box_as_detection_does(analyzer, photo_and_face):
    """BuiltinAnalyzer.refine (ONet alone at a known box) gives the detection's face again: same
    place, points within a few percent of the face, a face score; nothing on a blank image; a
    batch gives what one face at a time gives."""
    img, face = photo_and_face
    size = float(face.bbox[3] - face.bbox[1])
    shifted = face.copy(bbox=face.bbox + np.float32(0.1 * size))     # a tracker a tenth of a face off
    (got, moved), = analyzer.refine([img], [[face, shifted]])
    for f in (got, moved):
        assert f is not None and f.score >= analyzer.threshold
        assert iou(f.bbox, face.bbox) > 0.8, (f.bbox, face.bbox)
        assert np.abs(f.kps - face.kps).max() < 0.06 * size, (f.kps, face.kps)
    (alone,), = analyzer.refine([img], [[shifted]])
    np.testing.assert_allclose(alone.kps, moved.kps, atol=1e-3)
    assert analyzer.refine([np.full_like(img, 128)], [[face]]) == [[None]]


def test_qa_searches_windows_only_where_refinement_found_no_face(analyzer, photo_and_face, monkeypatch):
    """redetect.redetect: the originals always get the window search (the reference geometry the
    limits were calibrated on); a result the refinement confirms costs no window, one without a
    face there gets the window search as well, in the same detector call."""
    img, face = photo_and_face
    blank = np.full_like(img, 128)
    calls = []
    detect = analyzer.detect
    monkeypatch.setattr(analyzer, "detect", lambda images, **kw: calls.append(len(images)) or detect(images, **kw))
    orig, swp = redetect.redetect(analyzer, [img, img], [img, blank], [[face], [face]], 0.5)
    assert calls == [3]                                   # two originals + the blank result, one call
    windows = redetect.detect_around(analyzer, [img], [[face]])[0]
    np.testing.assert_allclose(orig[0][0].kps, windows[0].kps, atol=1e-3)    # batch of 3 vs 1: float noise
    assert [len(o) for o in orig] == [1, 1] and len(swp[0]) == 1 and swp[1] == []
    (refined,), = analyzer.refine([img], [[face]])
    np.testing.assert_allclose(swp[0][0].kps, refined.kps, atol=1e-3)
