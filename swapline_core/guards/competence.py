"""Is a face within what the swapper declares it can do (``FaceSwapper.competence``)?"""
from __future__ import annotations

import numpy as np

from ..types import Competence
from .pose import five_from_68, head_pose


def pose_of(face) -> tuple[float, float]:
    """(|yaw|, |pitch|): the larger of the five-point and the 68-point estimate when both exist.
    Detectors under-read turns on their own (on a profile MTCNN guesses the hidden eye, dlib's
    jaw collapses), so the more turned reading is the safer one."""
    yaw, pitch, _ = head_pose(face.kps)
    yaws, pitches = [abs(yaw)], [abs(pitch)]
    if face.landmarks is not None:
        y68, p68, _ = head_pose(five_from_68(face.landmarks))
        yaws.append(abs(y68))
        pitches.append(abs(p68))
    return _nanmax(yaws), _nanmax(pitches)


# np.nanmax / np.nanmedian of 1-5 floats cost ~40 us each in call overhead, more than the pose
# solve itself; these give the same values (NaN ignored, NaN when nothing else is left).
def _nanmax(vals) -> float:
    ok = [float(v) for v in vals if v == v]
    return max(ok) if ok else float("nan")


def _nanmedian(vals) -> float:
    s = sorted(float(v) for v in vals if v == v)
    n = len(s)
    if n == 0:
        return float("nan")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def nose_between_eyes(kps: np.ndarray, margin: float = 0.05) -> float:
    """Position of the nose tip along the eye line, 0 at one eye and 1 at the other; outside
    [-margin, 1 + margin] the far eye is behind the nose."""
    k = np.asarray(kps, np.float64)
    axis = k[1] - k[0]
    return float(np.dot(k[2] - k[0], axis) / max(float(np.dot(axis, axis)), 1e-9))


def track_pose(face, index: int | None, context, radius: int = 2, memo: dict | None = None) -> tuple[float, float]:
    """``pose_of`` as the median over the face's track in frames ``index +- radius`` (same shot).

    One frame's points can read a turn its neighbours do not have (a landmark slip on kling's
    frame 4 reads 59 deg between two 30-deg frames); refusing that frame alone would make it flicker
    back to the original. A real turn lasts more than a frame or two, so the median keeps it.
    A face whose own pose cannot be estimated stays NaN (refused), whatever its neighbours read.
    """
    if context is None or index is None or face.track_id is None or context.faces is None:
        return pose_of(face)
    frames = context.faces.frames
    lo = max([0] + [c for c in context.cuts if c <= index])
    hi = min([len(frames)] + [c for c in context.cuts if c > index])

    def pose(f):
        # Each neighbour's pose is read by up to 2 * radius + 1 faces of a chunk: ``memo`` (one
        # dict per screened chunk, keyed by the face object) solves each pose once.
        if memo is None:
            return pose_of(f)
        if id(f) not in memo:
            memo[id(f)] = (f, pose_of(f))     # the face is kept so its id stays unique
        return memo[id(f)][1]

    poses = [pose(face)]
    if not all(np.isfinite(poses[0])):
        # neighbours' median must not stand in for a face whose own points give no pose
        return poses[0]
    for j in range(max(lo, index - radius), min(hi, index + radius + 1)):
        if j != index:
            poses += [pose(f) for f in frames[j].faces if f.track_id == face.track_id]
    return _nanmedian([p[0] for p in poses]), _nanmedian([p[1] for p in poses])


def check(face, comp: Competence, who: str, pose: tuple[float, float] | None = None) -> str | None:
    io = float(np.linalg.norm(np.asarray(face.kps[1]) - np.asarray(face.kps[0])))
    if io < comp.min_inter_ocular_px:
        return (f"too small: eyes {io:.0f} px apart, the {who} swapper needs at least "
                f"{comp.min_inter_ocular_px:.0f} px")
    yaw, pitch = pose if pose is not None else pose_of(face)
    # NaN compares False against any limit: without this a face nobody could pose would pass
    if not (np.isfinite(yaw) and np.isfinite(pitch)):
        return (f"head pose unknown: head pose could not be estimated from the face's points (yaw {yaw:.1f}, "
                f"pitch {pitch:.1f}), so the {who} swapper's limits ({comp.max_yaw:.0f} deg turn, "
                f"{comp.max_pitch:.0f} deg pitch) cannot be checked")
    if yaw > comp.max_yaw:
        return f"head turned: yaw {yaw:.1f} deg beyond the {who} swapper's {comp.max_yaw:.0f} deg"
    if pitch > comp.max_pitch:
        return f"head pitched: pitch {pitch:.1f} deg beyond the {who} swapper's {comp.max_pitch:.0f} deg"
    if comp.needs_both_eyes:
        t = nose_between_eyes(face.kps)
        if not -0.05 <= t <= 1.05:
            return (f"eye hidden: the nose covers the far eye (nose at {t:.2f} of the eye line), "
                    f"which the {who} swapper needs")
    return None


# Hysteresis on pose, only where asked for (``GuardOptions.pose_tolerance_deg``, 0 by default: the
# swapper's declared limit is a limit). With a tolerance, a turn up to that many degrees past the
# limit inside a run of frames the swapper can do is bridged (swapped), so a head turning briefly
# does not flip the face between two identities; the limit decides where a track can be swapped,
# the tolerance keeps it swapped for a short while. Bridged frames are reported (``bridged_guard``)
# and judged by the QA gate like any other swapped frame.
def bridges_pose(face, index: int | None, context, comp: Competence, frames_each_side: int,
                 memo: dict | None = None, tolerance_deg: float = 0.0) -> bool:
    """True when ``face`` (refused for its pose) is no more than ``tolerance_deg`` past the limits
    and its track has a frame within the limits no more than ``frames_each_side`` frames before
    and after it, in the same shot."""
    if tolerance_deg <= 0 or frames_each_side <= 0 or context is None or index is None \
            or face.track_id is None or context.faces is None:
        return False
    yaw, pitch = track_pose(face, index, context, memo=memo)
    if not (np.isfinite(yaw) and np.isfinite(pitch) and yaw <= comp.max_yaw + tolerance_deg
            and pitch <= comp.max_pitch + tolerance_deg):
        return False
    frames = context.faces.frames
    lo = max([0] + [c for c in context.cuts if c <= index])
    hi = min([len(frames)] + [c for c in context.cuts if c > index])

    def within(j: int) -> bool:
        for f in frames[j].faces:
            if f.track_id == face.track_id:
                y, p = track_pose(f, j, context, memo=memo)
                return bool(np.isfinite(y) and np.isfinite(p) and y <= comp.max_yaw and p <= comp.max_pitch)
        return False

    before = any(within(j) for j in range(index - 1, max(lo, index - frames_each_side) - 1, -1))
    return before and any(within(j) for j in range(index + 1, min(hi, index + frames_each_side + 1)))
