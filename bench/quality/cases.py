"""Known-truth cases built from real face clips (MIT, ComfyUI workflow-template media).

Every case is a list of RGB frames plus what is true by construction: the exact pixel mask of a
composited occluder, the face boxes (from the clean clip, or scaled exactly for the small-face
case) and the frame where a hard cut starts a new shot.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import cv2
import numpy as np

from . import score

KLING = "api_kling_avatar2-1.webp"            # one talking face, sunglasses
TALK = "video_wan2_1_infinitetalk-1.webp"     # two faces, three-quarter views, glasses
# One talking face without glasses (face ~75-90 px): kling's red glasses are kept by the mask
# stack and then decide dlib's embedding, so identity is read a second time on this clip.
NO_GLASSES = "video_ltx2_3_i2v-1.webp"
# Where a clip cut short (``frames_limit``, the smoke check) starts: the scorer's HOG finds the
# ltx face only from frame 13 on (steadily from 17), and truth() needs a face in the base clip.
SHORT_START = {NO_GLASSES: 17}


@dataclass
class Case:
    name: str
    frames: list[np.ndarray]
    boxes: list[list[np.ndarray]]             # true face boxes per frame (x0, y0, x1, y1), forehead included
    clean_l68: list[np.ndarray | None]        # landmarks of the clean target (None: HOG found none)
    occluder: list[np.ndarray | None] = field(default_factory=list)   # exact occluder masks (bool)
    cuts: list[int] = field(default_factory=list)
    notes: str = ""


def load_clip(media_dir, name: str, limit: int | None = None, start: int = 0) -> list[np.ndarray]:
    from swapline_core.video.read import iter_frames

    path = media_dir / name
    if not path.is_file():
        raise FileNotFoundError(f"quality bench clip {path} is missing: run scripts/fetch_sample_media.py "
                                f"(it extracts the clips into {media_dir})")
    out = [f for _, f in iter_frames(str(path))][start:]
    return out[:limit] if limit else out


def face_box(l68: np.ndarray) -> np.ndarray:
    """Landmark box with the forehead (40 % of its height above the brows) and 10 % margins."""
    x0, y0 = l68.min(0)
    x1, y1 = l68.max(0)
    h, w = y1 - y0, x1 - x0
    y0 -= 0.4 * h
    return np.array([x0 - 0.1 * w, y0 - 0.1 * h * 1.4, x1 + 0.1 * w, y1 + 0.1 * h * 1.4], np.float32)


def truth(frames: list[np.ndarray]) -> tuple[list[np.ndarray | None], list[list[np.ndarray]]]:
    """Clean landmarks per frame; frames where HOG misses take the nearest frame's box."""
    l68 = [score.largest_face(f)[1] for f in frames]
    found = [i for i, v in enumerate(l68) if v is not None]
    if not found:
        raise RuntimeError("the scorer found no face in the base clip")
    boxes = []
    for i in range(len(frames)):
        j = min(found, key=lambda k: abs(k - i))
        boxes.append([face_box(l68[j])])
    return l68, boxes


def _iod(l68):
    return float(np.linalg.norm(l68[36:42].mean(0) - l68[42:48].mean(0)))


def draw_bar(frame, l68, i, n):
    m = np.zeros(frame.shape[:2], np.uint8)
    d = _iod(l68)
    le, re = l68[36:42].mean(0), l68[42:48].mean(0)
    c = (le + re) / 2
    ang = np.degrees(np.arctan2(re[1] - le[1], re[0] - le[0]))
    box = cv2.boxPoints(((float(c[0]), float(c[1])), (2.0 * d, 0.6 * d), float(ang)))
    cv2.fillConvexPoly(m, np.round(box).astype(np.int32), 1)
    return m.astype(bool), (28, 28, 34)


def draw_glasses(frame, l68, i, n):
    m = np.zeros(frame.shape[:2], np.uint8)
    d = _iod(l68)
    le, re = l68[36:42].mean(0), l68[42:48].mean(0)
    ang = float(np.degrees(np.arctan2(re[1] - le[1], re[0] - le[0])))
    for e in (le, re):
        cv2.ellipse(m, (int(round(e[0])), int(round(e[1]))), (int(0.42 * d), int(0.3 * d)), ang, 0, 360, 1, -1)
    cv2.line(m, tuple(int(v) for v in le), tuple(int(v) for v in re), 1, max(2, int(0.08 * d)))
    return m.astype(bool), (12, 14, 20)


def draw_hand(frame, l68, i, n):
    """A skin-coloured hand sliding across the lower face: what a colour model cannot see."""
    m = np.zeros(frame.shape[:2], np.uint8)
    d = _iod(l68)
    cheek = score.hull_mask(frame.shape, l68[[1, 2, 3, 31, 30, 29]])
    skin = np.median(frame[cheek], axis=0) * 0.92 if cheek.any() else np.array([190, 150, 130])
    x0, x1 = l68[:, 0].min() - 0.8 * d, l68[:, 0].max() + 0.2 * d
    cx = x0 + (x1 - x0) * i / max(n - 1, 1)
    cy = l68[57, 1]
    cv2.ellipse(m, (int(cx), int(cy)), (int(0.45 * d), int(0.6 * d)), 0, 0, 360, 1, -1)
    for k in range(4):
        fx = int(cx - 0.33 * d + k * 0.22 * d)
        cv2.rectangle(m, (fx, int(cy - 1.3 * d)), (fx + int(0.16 * d), int(cy)), 1, -1)
    return m.astype(bool), tuple(int(v) for v in skin)


def occluded(base: list[np.ndarray], l68s, boxes, name: str, draw) -> Case:
    frames, masks = [], []
    for i, (f, l68) in enumerate(zip(base, l68s)):
        if l68 is None:
            frames.append(f.copy())
            masks.append(None)
            continue
        m, colour = draw(f, l68, i, len(base))
        g = f.copy()
        g[m] = colour
        frames.append(g)
        masks.append(m)
    return Case(name, frames, boxes, l68s, masks)


def small_faces(base, l68s, face_px: int = 25, canvas=(1280, 720)) -> Case:
    """The clip scaled so the face is ~face_px tall, placed in a full-body-sized canvas."""
    heights = [b[0][3] - b[0][1] for b in truth_boxes_only(l68s)]
    s = face_px / (np.median(heights) / 1.4 / 1.28)     # undo face_box's forehead + margin growth
    W, H = canvas
    h, w = base[0].shape[:2]
    sw, sh = max(8, int(round(w * s))), max(8, int(round(h * s)))
    rng = np.random.default_rng(7)
    bg = cv2.GaussianBlur(rng.integers(60, 160, (H, W, 3)).astype(np.uint8), (0, 0), 9)
    ox, oy = int(W * 0.55), int(H * 0.35)
    frames, boxes, lm = [], [], []
    for f, b, l68 in zip(base, truth_boxes_only(l68s), l68s):
        g = bg.copy()
        g[oy:oy + sh, ox:ox + sw] = cv2.resize(f, (sw, sh), interpolation=cv2.INTER_AREA)
        frames.append(g)
        boxes.append([b[0] * np.float32(sw / w) + np.array([ox, oy, ox, oy], np.float32)])
        # the clean clip's landmarks scaled with it (exact by construction, not re-detected at 25 px)
        lm.append(None if l68 is None else np.asarray(l68, np.float32) * np.float32(sw / w) + np.float32([ox, oy]))
    return Case("small_faces", frames, boxes, lm, notes=f"face ~{face_px} px tall in {W}x{H}")


def truth_boxes_only(l68s):
    found = [i for i, v in enumerate(l68s) if v is not None]
    return [[face_box(l68s[min(found, key=lambda k: abs(k - i))])] for i in range(len(l68s))]


def hard_cut(a: list[np.ndarray], b: list[np.ndarray], n: int = 24) -> Case:
    n = min(n, len(a), len(b))       # clips cut short (frames_limit): the cut is where a ends
    h, w = a[0].shape[:2]
    b = [cv2.resize(f, (w, h), interpolation=cv2.INTER_AREA) if f.shape[:2] != (h, w) else f for f in b]
    frames = a[:n] + b[:n]
    l68, boxes = truth(frames)
    return Case("hard_cut", frames, boxes, l68, cuts=[n])


def build(media_dir, frames_limit: int | None = None) -> list[Case]:
    base = load_clip(media_dir, KLING, frames_limit)
    l68, boxes = truth(base)
    cases = [Case("speech", [f.copy() for f in base], boxes, l68)]
    cases += [occluded(base, l68, boxes, "occluder_bar", draw_bar),
              occluded(base, l68, boxes, "occluder_sunglasses", draw_glasses),
              occluded(base, l68, boxes, "occluder_skin_hand", draw_hand)]
    cases.append(small_faces(base, l68))
    cases.append(hard_cut(base, load_clip(media_dir, TALK, frames_limit)))
    plain = load_clip(media_dir, NO_GLASSES, frames_limit, SHORT_START.get(NO_GLASSES, 0) if frames_limit else 0)
    l68p, boxesp = truth(plain)
    cases.append(Case("identity_no_glasses", plain, boxesp, l68p, notes="talking face without glasses"))
    return cases
