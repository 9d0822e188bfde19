"""Shot cuts: found on real clips joined by a hard cut, tracks reset there, resume gives the same."""
from __future__ import annotations

import pytest

from devtools.tracking_clips import KLING, WAN, frames_of, write_clip
from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
from swapline_core.faces.tracking import iou
from swapline_core.video import stages as pipeline
from swapline_core.video.cuts import CutDetector
from swapline_core.video.frames import FrameSequence

CUT = 20


@pytest.fixture(scope="module")
def joined():
    return frames_of(KLING, CUT) + frames_of(WAN, 20)


def test_no_cut_inside_the_sample_shots():
    for path in (KLING, WAN):
        assert CutDetector().feed(frames_of(path)) == [], path.name


def test_hard_cut_found_at_its_index_also_when_fed_in_chunks(joined):
    assert CutDetector().feed(joined) == [CUT]
    # Chunks of 7 with state carried through state()/restore(), as a resumed run does.
    found, state = [], None
    for s in range(0, len(joined), 7):
        det = CutDetector()
        if state is not None:
            det.restore(state, joined[s - 1])
        found += det.feed(joined[s:s + 7])
        state = det.state()
    assert found == [CUT]


@pytest.fixture(scope="module")
def analyzer():
    return BuiltinAnalyzer()


def _track(path, analyzer, root):
    seq = FrameSequence.open(path, chunk=8)
    return pipeline.track_faces(seq, analyzer, root, pipeline.Hooks(), mode="largest", detect_every=8)


def _boxes(faces):
    return [[(f.track_id, f.bbox.tolist(), f.kps.tolist()) for f in fr.faces]
            for fr in faces.frames]


def test_tracks_reset_at_the_cut_and_resume_is_identical(joined, analyzer, tmp_path):
    path = write_clip(tmp_path / "joined", joined)
    root = str(tmp_path / "store")
    faces, report = _track(path, analyzer, root)
    assert faces.cuts == (CUT,) and report.extra["cuts"] == [CUT]
    assert faces.to_json()["cuts"] == [CUT]
    assert report.extra["tracker"]["cuts"] == 1
    before = {f.track_id for fr in faces.frames[:CUT] for f in fr.faces}
    after = {f.track_id for fr in faces.frames[CUT:] for f in fr.faces}
    assert before and after and not before & after, "a track id spans the cut"
    # The cut frame (not a planned detector frame: 16, 24) already holds the new shot's face,
    # nowhere near the last box of the old shot.
    last_old = faces.frames[CUT - 1].faces[0].bbox
    first_new = faces.frames[CUT].faces
    assert first_new and iou(first_new[0].bbox, last_old) < 0.2
    wan_face = analyzer.detect([joined[CUT]])[0]
    assert max(iou(first_new[0].bbox, f.bbox) for f in wan_face) > 0.7

    # Resume: drop the chunks from the one holding the cut on, run again.
    store_dir = tmp_path / "store" / report.key
    for c in range(CUT // 8, 5):
        (store_dir / f"chunk_{c:06d}.npz").unlink()
    again, report2 = _track(path, analyzer, root)
    assert report2.chunks_resumed == CUT // 8
    assert again.cuts == faces.cuts
    assert _boxes(again) == _boxes(faces)


def test_qa_does_not_measure_flicker_across_a_cut(joined, analyzer):
    from swapline_core.faces import identity as face_model
    from swapline_core.qa import gate as qa

    src = joined[0]
    face = analyzer.detect([src])[0][0]
    analyzer.embed([src], [[face]])
    source = face_model.build([src], [face], analyzer.recognizer_name)
    frames = joined[CUT - 1:CUT + 2]
    faces = [analyzer.detect([f])[0][:1] for f in frames]
    plain = qa.evaluate_chunk(analyzer, frames, frames, faces, source, None, CUT - 1)
    reset = qa.evaluate_chunk(analyzer, frames, frames, faces, source, None, CUT - 1, cuts={CUT})
    assert plain[1]["faces"][0]["flicker_ratio"] is not None
    assert reset[1]["faces"][0]["flicker_ratio"] is None               # the cut frame
    assert reset[2]["faces"][0]["flicker_ratio"] == plain[2]["faces"][0]["flicker_ratio"]
