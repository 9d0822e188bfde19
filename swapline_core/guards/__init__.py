"""Guards: decide per face whether a swap can be done well, before anything is pasted.

Each check returns None or a reason ``"<category>: <detail>"``; the first reason wins. The
category (before the colon) is what reports count (``reason_category``):
- competence (``competence.py``): too small, head turned / pitched, head pose unknown, eye
  hidden, against the limits the swapper declares (``FaceSwapper.competence``, optionally
  tightened here; loosened only by the explicit ``pose_tolerance_deg`` hysteresis in a track);
- plausibility (``plausibility.py``): implausible landmarks, track jump, no skin.
A refused face is left untouched; ``swap.chunk`` records ``{"status": "skipped", "reason": ...}``.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace

from ..faces.tracking import iou
from . import competence as _competence
from . import plausibility as _plaus


@dataclass(frozen=True)
class GuardOptions:
    enabled: bool = True
    max_yaw: float = 0.0                  # 0: the swapper's own limit; else the lower of the two
    max_pitch: float = 0.0
    max_shape_residual: float = 0.45      # mean-face units; 0 disables
    min_skin: float = 0.2                 # share of the paste region; 0 disables
    track_window: int = 6                 # frames each side compared against; 0 disables
    max_size_ratio: float = 1.5
    max_shift: float = 0.6                # in face sizes, against the track's interpolation
    # Hysteresis, off by default: a pose up to pose_tolerance_deg past the swapper's declared
    # limit is swapped only between frames of its track within the limit, at most bridge_frames
    # away on both sides (competence.bridges_pose). 0: the declared limit is a limit.
    pose_tolerance_deg: float = 0.0
    bridge_frames: int = 12

    def to_json(self) -> dict:
        return {"enabled": self.enabled, "max_yaw": self.max_yaw, "max_pitch": self.max_pitch,
                "max_shape_residual": self.max_shape_residual, "min_skin": self.min_skin,
                "track_window": self.track_window, "max_size_ratio": self.max_size_ratio,
                "max_shift": self.max_shift, "pose_tolerance_deg": self.pose_tolerance_deg,
                "bridge_frames": self.bridge_frames}


def reason_category(reason: str) -> str:
    return reason.split(":", 1)[0].strip() or "unknown"


@dataclass
class Refusals:
    """The refused faces of a swap's records, by reason category: how many, on which frames, and
    one full reason per category (what a report shows a user: "head turned: yaw 55.5 deg beyond
    the classical_delaunay swapper's 45 deg")."""
    count: dict = field(default_factory=lambda: defaultdict(int))
    frames: dict = field(default_factory=lambda: defaultdict(set))
    example: dict = field(default_factory=dict)
    swapped: int = 0
    bridged: set = field(default_factory=set)     # frames swapped through pose_tolerance_deg

    def add(self, first: int, records) -> None:
        """``records``: per frame, the face records of ``swap.chunk`` (frame ``first`` onwards)."""
        for k, row in enumerate(records):
            for rec in row:
                if rec.get("status") == "skipped":
                    reason = rec.get("reason", "unknown")
                    cat = reason_category(reason)
                    self.count[cat] += 1
                    self.frames[cat].add(first + k)
                    self.example.setdefault(cat, reason)
                elif rec.get("status") == "swapped":
                    self.swapped += 1
                    if rec.get("bridged_guard"):
                        self.bridged.add(first + k)

    def to_json(self) -> dict:
        out = {"faces_swapped": self.swapped, "skipped": dict(self.count),
               "skipped_frames": {k: sorted(v) for k, v in self.frames.items()},
               "skipped_reasons": dict(self.example)}
        if self.bridged:    # past the declared limit, swapped only because a tolerance was set
            out["pose_bridged_frames"] = sorted(self.bridged)
        return out


def refused_boxes(records) -> list[list[list[float]]]:
    """Per frame, the boxes of the faces a swap refused (``swap.chunk`` records with a reason):
    what an image passed on from the swap carries, so later stages can leave those faces alone."""
    return [[list(rec["bbox"]) for rec in row if rec.get("status") == "skipped" and rec.get("reason")]
            for row in records]


def without_refused_boxes(per_frame_faces, boxes, min_iou: float = 0.5) -> tuple[list[list], int]:
    """Each frame's faces less those matching a refused box (``refused_boxes``) of the same frame,
    and how many were left out. By box overlap, not identity: the faces given to a later stage
    may be a fresh detection on the swap's output, and a refused face there is the target's own
    face, where it was."""
    kept, dropped = [], 0
    for k, fs in enumerate(per_frame_faces):
        rb = boxes[k] if k < len(boxes) else []
        row = [f for f in fs if not any(iou(f.bbox, b) >= min_iou for b in rb)]
        dropped += len(fs) - len(row)
        kept.append(row)
    return kept, dropped


def competence_for(swapper, opts: GuardOptions):
    comp = getattr(swapper, "competence", None) or _competence.Competence()
    changes = {}
    if opts.max_yaw > 0:
        changes["max_yaw"] = min(comp.max_yaw, opts.max_yaw)
    if opts.max_pitch > 0:
        changes["max_pitch"] = min(comp.max_pitch, opts.max_pitch)
    return replace(comp, **changes) if changes else comp


def check_face(swapper, frame, face, opts: GuardOptions, context=None, index: int | None = None,
               memo: dict | None = None, bridged: list | None = None) -> str | None:
    """The reason ``face`` must not be swapped, or None. ``memo``: a dict shared by the faces of
    one chunk (``screen``), so neighbouring frames' poses are solved once. A pose refusal bridged
    inside its track (``competence.bridges_pose``, only with ``opts.pose_tolerance_deg``) is appended
    to ``bridged`` and the face swapped."""
    who = getattr(swapper, "name", "this")
    comp = competence_for(swapper, opts)
    why = (_plaus.geometry(face, frame.shape)
           or _plaus.shape(face, opts.max_shape_residual)
           or _plaus.track_jump(face, index, context, opts.track_window, opts.max_size_ratio, opts.max_shift))
    if why:
        return why
    pose = _competence.track_pose(face, index, context, memo=memo)
    why = _competence.check(face, comp, who, pose)
    if why and reason_category(why) in ("head turned", "head pitched") and _competence.bridges_pose(
            face, index, context, comp, opts.bridge_frames, memo, opts.pose_tolerance_deg):
        # judged again at the limit, so the other competence checks (size, a hidden eye) still apply
        again = _competence.check(face, comp, who, (min(pose[0], comp.max_yaw), min(pose[1], comp.max_pitch)))
        if again is None and bridged is not None:
            bridged.append(why)
        why = again
    return why or _plaus.skin(frame, face, opts.min_skin)


def screen(swapper, frames, faces, opts: GuardOptions, context=None,
           bridged: dict | None = None) -> list[list[str | None]]:
    """Per frame, per face: None (swap it) or the reason it is left untouched. ``context``
    (a ClipContext) adds the track-history checks; frame k of the chunk is clip frame
    ``context.first_index + k``. ``bridged`` (optional) receives {(k, j): the pose refusal a
    face was swapped through} (``check_face``)."""
    if not opts.enabled:
        return [[None for _ in fs] for fs in faces]
    first = 0 if context is None else context.first_index
    memo: dict = {}
    out = []
    for k, (frame, fs) in enumerate(zip(frames, faces)):
        row = []
        for j, f in enumerate(fs):
            note: list = []
            row.append(check_face(swapper, frame, f, opts, context, None if context is None else first + k, memo, note))
            if note and bridged is not None:
                bridged[(k, j)] = note[0]
        out.append(row)
    return out
