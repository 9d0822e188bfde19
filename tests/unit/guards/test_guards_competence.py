"""Competence guards: each swapper declares where it works; faces outside are refused with a reason."""
from __future__ import annotations

import cv2
import numpy as np
import pytest
from guard_media import KLING, TALK, clip_faces

from swapline_core.backends.classical import ClassicalSwapper
from swapline_core.backends.inswapper import InSwapper
from swapline_core.guards import GuardOptions, check_face, reason_category, screen
from swapline_core.guards.competence import check
from swapline_core.guards.pose import _HEAD5, head_pose


def _project(yaw: float, pitch: float, roll: float = 0.0) -> np.ndarray:
    """The generic head turned by known angles, seen orthographically (what a long lens sees)."""
    ry = cv2.Rodrigues(np.array([0.0, np.radians(-yaw), 0.0]))[0]
    rx = cv2.Rodrigues(np.array([np.radians(pitch), 0.0, 0.0]))[0]
    rz = cv2.Rodrigues(np.array([0.0, 0.0, np.radians(roll)]))[0]
    p = _HEAD5 @ (ry @ rx @ rz).T       # roll in the face plane, then nod, then turn
    return (p[:, :2] * 2.0 + 200.0).astype(np.float32)


@pytest.mark.parametrize("yaw,pitch", [(0, 0), (30, 0), (-50, 0), (0, 25), (40, -20), (70, 10)])
def test_head_pose_recovers_known_angles(yaw, pitch):
    y, p, _ = head_pose(_project(yaw, pitch))
    assert abs(y - yaw) < 3 and abs(p - pitch) < 3, (y, p)


def test_roll_does_not_read_as_yaw():
    y, p, r = head_pose(_project(20, 0, roll=30))
    assert abs(y - 20) < 3 and abs(p) < 3 and abs(abs(r) - 30) < 3


def test_profiles_are_refused_for_the_classical_swapper():
    # infinitetalk: the man at a three-quarter turn (far eye behind the nose), the woman in profile.
    frames, faces = clip_faces(TALK, 45)
    verdicts = screen(ClassicalSwapper(), frames, faces, GuardOptions())
    cats = {reason_category(v) if v else None for row in verdicts for v in row}
    assert cats <= {"head turned", "eye hidden"}, cats
    assert sum(len(r) for r in verdicts) == 50           # 45 frames of him, 5 of her: all refused


def test_frontal_talking_face_passes_and_the_yaw_limit_is_adjustable():
    frames, faces = clip_faces(KLING, 16)
    v = screen(ClassicalSwapper(), frames, faces, GuardOptions())
    ok = [i for i, row in enumerate(v) if row == [None]]
    assert len(ok) >= 15, v              # frame 4 is a landmark glitch (MTCNN reads a 59 deg turn)
    tight = screen(ClassicalSwapper(), frames, faces, GuardOptions(max_yaw=8.0))
    assert all(reason_category(row[0]) == "head turned" for row in tight)
    # The option can only tighten the swapper's own limit.
    loose = screen(ClassicalSwapper(), frames, faces, GuardOptions(max_yaw=89.0))
    assert loose == v


def test_rotated_landmarks_beyond_the_limit_are_refused():
    frames, faces = clip_faces(KLING, 1)
    face = faces[0][0]
    sw = ClassicalSwapper()
    assert check_face(sw, frames[0], face, GuardOptions()) is None
    # Turn the five points of the generic head by 60 deg and place them on this face's box.
    kps = _project(60, 0)
    kps = (kps - kps.mean(0)) * (face.inter_ocular / np.linalg.norm(kps[1] - kps[0])) + face.kps.mean(0)
    turned = face.copy(kps=kps.astype(np.float32), landmarks=None)
    why = check_face(sw, frames[0], turned, GuardOptions(min_skin=0.0))
    assert why is not None and reason_category(why) in ("head turned", "eye hidden"), why


def test_declared_competences_and_small_faces():
    assert ClassicalSwapper.competence.max_yaw == 45 and ClassicalSwapper.competence.needs_both_eyes
    assert InSwapper.competence.min_inter_ocular_px >= 10 and InSwapper.competence.max_yaw > 45
    _, faces = clip_faces(KLING, 1)
    face = faces[0][0]
    c = face.kps.mean(0)
    small = face.copy(kps=((face.kps - c) * 0.05 + c).astype(np.float32), landmarks=None)
    why = check(small, InSwapper.competence, "inswapper_128")
    assert why is not None and reason_category(why) == "too small"
    assert check(face, InSwapper.competence, "inswapper_128") is None


def _turning_track(yaws, cuts=()):
    """One track on the kling frame whose five points turn by ``yaws`` (one per frame)."""
    from guard_media import analyzer

    from swapline_core.types import ClipContext, FaceSet, FrameFaces

    frames, faces = clip_faces(KLING, 1)
    face = faces[0][0]
    out = []
    for yaw in yaws:
        kps = _project(yaw, 0)
        kps = (kps - kps.mean(0)) * (face.inter_ocular / np.linalg.norm(kps[1] - kps[0])) + face.kps.mean(0)
        out.append([face.copy(kps=kps.astype(np.float32), landmarks=None, track_id=0)])
    h, w = frames[0].shape[:2]
    fset = FaceSet([FrameFaces(i, fs, w, h) for i, fs in enumerate(out)], analyzer())
    return [frames[0]] * len(yaws), out, ClipContext(fset, 0, cuts=tuple(cuts))


def test_the_declared_limit_is_a_limit_inside_a_track_too():
    """Issue 49: 50 deg between 30-deg frames is past the classical swapper's declared 45 deg, so
    with the default options it is refused on every such frame, however short the turn."""
    yaws = [30] * 6 + [50] * 5 + [30] * 6
    frames, faces, ctx = _turning_track(yaws)
    assert GuardOptions().pose_tolerance_deg == 0
    bridged = {}
    v = screen(ClassicalSwapper(), frames, faces, GuardOptions(min_skin=0.0), ctx, bridged)
    assert [reason_category(row[0]) if row[0] else None for row in v] == \
        [None] * 6 + ["head turned"] * 5 + [None] * 6, v
    assert bridged == {}
    assert "beyond the classical_delaunay swapper's 45 deg" in v[6][0], v[6][0]


def test_a_short_turn_within_the_pose_tolerance_is_bridged_inside_its_track():
    """Hysteresis (issue 30 item 5), now only as the explicit ``pose_tolerance_deg``: 50 deg between
    30-deg frames is swapped with a 10 deg tolerance, so the face does not flip identity for a
    brief turn; the swap says which frames it bridged."""
    opts = GuardOptions(min_skin=0.0, pose_tolerance_deg=10.0)
    yaws = [30] * 6 + [50] * 5 + [30] * 6
    frames, faces, ctx = _turning_track(yaws)
    bridged = {}
    v = screen(ClassicalSwapper(), frames, faces, opts, ctx, bridged)
    assert all(row == [None] for row in v), v
    assert sorted(k for k, _ in bridged) == list(range(6, 11))
    assert all(reason_category(r) == "head turned" for r in bridged.values())
    # a tolerance smaller than the overshoot bridges nothing
    v4 = screen(ClassicalSwapper(), frames, faces, GuardOptions(min_skin=0.0, pose_tolerance_deg=4.0), ctx)
    assert [reason_category(row[0]) if row[0] else None for row in v4][6:11] == ["head turned"] * 5
    # bridge_frames 0: each turned frame is refused on its own, whatever the tolerance
    v0 = screen(ClassicalSwapper(), frames, faces, GuardOptions(min_skin=0.0, pose_tolerance_deg=10.0,
                                                                 bridge_frames=0), ctx)
    assert [reason_category(row[0]) if row[0] else None for row in v0][6:11] == ["head turned"] * 5


def test_the_pose_tolerance_never_loosens_a_face_outside_a_track():
    frames, faces = clip_faces(KLING, 1)
    face = faces[0][0]
    kps = _project(50, 0)
    kps = (kps - kps.mean(0)) * (face.inter_ocular / np.linalg.norm(kps[1] - kps[0])) + face.kps.mean(0)
    turned = face.copy(kps=kps.astype(np.float32), landmarks=None)
    why = check_face(ClassicalSwapper(), frames[0], turned, GuardOptions(min_skin=0.0, pose_tolerance_deg=20.0))
    assert why is not None and reason_category(why) == "head turned", why


@pytest.mark.parametrize("pose", [(30.0, float("nan")), (float("nan"), 10.0), (float("nan"), float("nan"))])
def test_a_pose_that_cannot_be_estimated_is_refused(pose):
    _, faces = clip_faces(KLING, 1)
    why = check(faces[0][0], ClassicalSwapper.competence, "classical_delaunay", pose)
    assert why is not None and "head pose could not be estimated" in why, why
    assert reason_category(why) == "head pose unknown"


def test_head_pose_is_nan_not_an_exception_for_points_it_cannot_pose():
    # SQPnP asserts on points without spread; a guard must get NaN (refused), not a crashed swap
    for kps in (np.zeros((5, 2)), np.full((5, 2), np.nan)):
        assert all(np.isnan(head_pose(kps)))


def test_a_face_whose_own_pose_cannot_be_estimated_is_refused_between_good_frames(monkeypatch):
    """The track median must not stand in for a face whose own points give no pose."""
    from swapline_core.guards import competence

    frames, faces, ctx = _turning_track([20] * 7)
    bad = faces[3][0]
    real = competence.pose_of
    monkeypatch.setattr(competence, "pose_of", lambda f: (float("nan"),) * 2 if f is bad else real(f))
    v = screen(ClassicalSwapper(), frames, faces, GuardOptions(min_skin=0.0), ctx)
    assert [reason_category(row[0]) if row[0] else None for row in v] == [None] * 3 + ["head pose unknown"] + [None] * 3


@pytest.mark.parametrize("case", ["too far", "no way back", "across a cut"])
def test_turns_beyond_the_tolerance_or_without_both_sides_stay_refused(case):
    opts = GuardOptions(min_skin=0.0, pose_tolerance_deg=10.0)
    yaws, cuts = {"too far": ([30] * 6 + [58] * 3 + [30] * 6, ()),       # 58 > 45 + 10
                  "no way back": ([30] * 6 + [50] * 9, ()),              # the turn lasts to the end
                  "across a cut": ([30] * 6 + [50] * 3 + [30] * 6, (9,))}[case]
    frames, faces, ctx = _turning_track(yaws, cuts)
    v = screen(ClassicalSwapper(), frames, faces, opts, ctx, {})
    assert all(reason_category(v[i][0]) == "head turned" for i in range(7, 9)), v


def test_frames_swapped_through_the_tolerance_are_reported():
    """What the swap stage reports (``Refusals``, from ``swap_chunk``'s records): the frames a
    tolerance bridged, so a face past the declared limit is never swapped unsaid."""
    from guard_media import REPO, analyzer
    from PIL import Image

    from swapline_core.faces import identity
    from swapline_core.guards import Refusals
    from swapline_core.swap.chunk import SwapOptions, swap_chunk

    source = identity.build_from_images(analyzer(), [np.array(Image.open(REPO / "assets" / "samples" /
                                                                         "source_face.png").convert("RGB"))])
    frames, faces, ctx = _turning_track([30] * 3 + [50] * 5 + [30] * 3)
    for opts, bridged in ((GuardOptions(min_skin=0.0, pose_tolerance_deg=10.0), [3, 4, 5, 6, 7]),
                          (GuardOptions(min_skin=0.0), [])):
        res = swap_chunk(ClassicalSwapper(), analyzer(), frames, faces, source, SwapOptions(guards=opts), context=ctx)
        rep = Refusals()
        rep.add(0, res.records)
        assert rep.to_json().get("pose_bridged_frames", []) == bridged, rep.to_json()
        assert rep.to_json()["skipped"] == ({} if bridged else {"head turned": 5})
