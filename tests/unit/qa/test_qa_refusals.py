"""The swap stage's refusals reach the QA gate: a face the guards or the swapper's competence
check refused is left untouched, counted in coverage with its reason, and does not fail its frame."""
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer  # noqa: E402
from swapline_core.backends.classical import ClassicalSwapper  # noqa: E402
from swapline_core.faces import identity as face_model  # noqa: E402
from swapline_core.guards import GuardOptions  # noqa: E402
from swapline_core.qa import gate  # noqa: E402
from swapline_core.swap.chunk import SwapOptions  # noqa: E402
from swapline_core.video import stages  # noqa: E402
from swapline_core.video.frames import FrameSequence  # noqa: E402

CLIP = ROOT / "assets" / "samples" / "kling_avatar_clip.mp4"
SOURCE = ROOT / "assets" / "samples" / "source_face.png"


def test_swap_refusals_are_counted_with_their_reason(tmp_path):
    analyzer = BuiltinAnalyzer()
    source = face_model.build_from_images(analyzer, [np.array(Image.open(SOURCE).convert("RGB"))])
    seq = FrameSequence.open(str(CLIP), count=8, chunk=4)
    store = str(tmp_path)
    faces, _ = stages.track_faces(seq, analyzer, store, stages.Hooks(), mode="largest")
    # A yaw limit of a tenth of a degree: the competence check refuses (nearly) every face.
    opts = SwapOptions(guards=GuardOptions(max_yaw=0.1))
    out, swap_report = stages.swap_frames(seq, faces, source, ClassicalSwapper(), analyzer, store,
                                          stages.Hooks(), opts)
    refused = stages.swap_refusals(out)
    n_refused = sum(len(v) for v in refused.values())
    assert swap_report.extra["skipped"].get("head turned", 0) == n_refused > 0
    assert all(r.startswith("head turned: yaw") for v in refused.values() for r in v.values())

    rep = gate.run_qa(replace(out, layers=()), out, faces, source, analyzer, skipped=refused)
    s = rep["summary"]
    assert s["faces_skipped"] == {"head turned": n_refused}
    cov = next(iter(s["coverage"].values()))
    assert cov["skipped"] == {"head turned": n_refused} and cov["swapped"] == cov["frames"] - n_refused
    for r in rep["frames"]:
        for f in r["faces"]:
            if f.get("track_id") in refused.get(r["frame"], {}):
                # untouched on purpose: its full reason on the record, no failure for it
                assert f["reasons"] == [] and f["skip_reason"].startswith("head turned")
    # without the refusals the same untouched faces are failures ("face not swapped")
    plain = gate.run_qa(replace(out, layers=()), out, faces, source, analyzer)
    assert plain["summary"]["faces_skipped"] == {}
    assert plain["summary"]["fail"] >= len(refused)
