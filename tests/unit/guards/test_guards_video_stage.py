"""The video swap stage with guards: a glitched giant face in a tracked clip is left untouched,
counted by reason in the stage report, and a resumed run reports the same."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
from swapline_core.backends.classical import ClassicalSwapper
from swapline_core.faces import identity as face_model
from swapline_core.video import stages
from swapline_core.video.frames import FrameSequence

CLIP = REPO / "assets" / "samples" / "kling_avatar_clip.mp4"
SOURCE = REPO / "assets" / "samples" / "source_face.png"
GLITCH = 20


def test_giant_face_in_a_tracked_clip_is_skipped_counted_and_resumed_alike(tmp_path):
    an = BuiltinAnalyzer()
    img = np.array(Image.open(SOURCE).convert("RGB"))
    face = max(an.detect([img])[0], key=lambda f: f.area)
    an.embed([img], [[face]])
    an.landmarks68([img], [[face]])
    source = face_model.build([img], [face], an.recognizer_name)
    seq = FrameSequence.open(str(CLIP), chunk=16)
    faces, _ = stages.track_faces(seq, an, str(tmp_path), stages.Hooks(), mode="largest")
    # The dance-clip failure: one frame's detection several times too large, off the face.
    f = faces.frames[GLITCH].faces[0]
    c = (f.bbox[:2] + f.bbox[2:]) / 2
    shift = np.array([0.0, 0.6 * (f.bbox[3] - f.bbox[1])], np.float32)
    big = np.concatenate([(f.bbox[:2] - c) * 4 + c, (f.bbox[2:] - c) * 4 + c]) + np.tile(shift, 2)
    faces.frames[GLITCH].faces[0] = f.copy(bbox=big,
                                           kps=(f.kps - c) * 4 + c + shift)
    out, report = stages.swap_frames(seq, faces, source, ClassicalSwapper(), an, str(tmp_path), stages.Hooks())
    assert report.extra["skipped"].get("track jump") == 1, report.extra
    assert report.extra["skipped_frames"]["track jump"] == [GLITCH]
    before = seq.read_chunk(GLITCH // 16)
    after = out.read_chunk(GLITCH // 16)
    k = GLITCH % 16
    assert np.array_equal(before[k], after[k])                       # untouched
    assert not np.array_equal(before[k - 1], after[k - 1])           # its neighbours are swapped
    assert sum(report.extra["skipped"].values()) <= 3, report.extra  # a frontal clip: little else refused

    _, again = stages.swap_frames(seq, faces, source, ClassicalSwapper(), an, str(tmp_path), stages.Hooks())
    assert again.chunks_resumed == again.chunks_total
    assert again.extra["skipped"] == report.extra["skipped"]
    assert again.extra["skipped_frames"] == report.extra["skipped_frames"]
    # Other classical settings: other pixels, so nothing stored by the first run is reused.
    _, other = stages.swap_frames(seq, faces, source, ClassicalSwapper(mask_feather=0.08), an, str(tmp_path),
                                  stages.Hooks())
    assert other.chunks_resumed == 0


def test_refused_boxes_leave_out_the_same_face_on_a_fresh_detection():
    """What Restore Faces (images) does with a swap's refusals: a face whose box overlaps a refused
    one of the same frame is left out (also when it comes from a new detection, boxes a few px
    off), the other faces and frames are kept; records without a reason are not refusals."""
    from swapline_core.guards import refused_boxes, without_refused_boxes
    from swapline_core.types import Face

    records = [[{"bbox": [10.0, 10.0, 60.0, 70.0], "status": "skipped", "reason": "head turned: yaw 55 deg"},
                {"bbox": [100.0, 10.0, 150.0, 70.0], "status": "swapped"}],
               [{"bbox": [10.0, 10.0, 60.0, 70.0], "status": "skipped"}]]
    boxes = refused_boxes(records)
    assert boxes == [[[10.0, 10.0, 60.0, 70.0]], []]

    def face(*b):
        return Face(bbox=np.array(b, np.float32), kps=np.zeros((5, 2), np.float32), score=1.0)

    frames = [[face(13, 12, 62, 73), face(100, 10, 150, 70)], [face(10, 10, 60, 70)], [face(10, 10, 60, 70)]]
    kept, dropped = without_refused_boxes(frames, boxes)
    assert dropped == 1
    assert [len(r) for r in kept] == [1, 1, 1] and kept[0][0] is frames[0][1]
