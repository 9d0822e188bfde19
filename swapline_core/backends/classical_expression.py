"""The classical swap's expression and shape transfer (``classical.py``): which of the 68 points
move to the source's proportions and which keep the target's expression, and the target's own
mouth interior and eyeballs painted back where the source has no pixels for them (an open mouth,
an eye opened wider than the source's).

Static proportions (eye corners, nose width, mouth width, lip thickness) are identity and come
from the source; openings (lids, lips) are expression and stay the target's."""
from __future__ import annotations

import cv2
import numpy as np

from ..faces.shape import eye_aspect

_INNER = np.arange(27, 68)     # nose, eyes, mouth: moved by shape transfer; never on the hull
_NOSE = np.arange(27, 36)
# Features whose *placement* (corners: position, size, tilt) is identity and whose *shape inside
# the corners* (lid and lip opening, smile) is expression: (points, corner a, corner b).
_EYE_L, _EYE_R, _MOUTH = (np.arange(36, 42), 36, 39), (np.arange(42, 48), 42, 45), (np.arange(48, 68), 48, 54)
_INNER_MOUTH = np.arange(60, 68)
_OUTER_LIP = np.array([49, 50, 51, 52, 53, 55, 56, 57, 58, 59])
_LIP_ANCHORS = ((60, 61), (61, 61), (62, 62), (63, 63), (63, 64), (64, 65), (65, 65), (66, 66), (67, 67), (67, 60))


def _similarity(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Least-squares rotation+scale+shift (Umeyama) taking ``src`` to ``dst``; 2x3."""
    ms, md = src.mean(axis=0), dst.mean(axis=0)
    s, d = src - ms, dst - md
    u, sv, vt = np.linalg.svd(d.T @ s / len(src))
    e = np.diag([1.0, np.sign(np.linalg.det(u @ vt))])
    rot = u @ e @ vt
    scale = float(np.trace(np.diag(sv) @ e) / max(float((s ** 2).sum() / len(src)), 1e-12))
    a = scale * rot
    return np.hstack([a, (md - a @ ms)[:, None]])


def transfer_shape(src_pts, dst_pts, hull_pts, alpha, expression: bool = True) -> np.ndarray:
    """Move the target's inner points toward the source's, after aligning the source shape to
    the target: identity lives in feature proportions as much as in texture. The hull points
    stay, so the pasted area does not change; points that would leave the hull stay too.

    With ``expression`` only static proportions come from the source: the nose, each eye's
    corners (spacing, size, tilt) and the mouth's width. Each eye keeps the target's lid shape,
    carried along by the similarity that moves its corners, so openness (height over width)
    follows the target; the mouth keeps the target's centre and every vertical distance (the
    opening, lip shape) and is only stretched along its corner axis to the source's width, so
    the target's mouth interior stays where the target has it.
    """
    src, dst = src_pts.astype(np.float64), dst_pts.astype(np.float64)
    m = _similarity(src, dst)
    aligned = src @ m[:, :2].T + m[:, 2]
    out = dst.copy()
    if not expression:
        out[_INNER] += alpha * (aligned[_INNER] - dst[_INNER])
    else:
        out[_NOSE] = _nose_fit(dst, aligned, alpha)
        for idx, a, b in (_EYE_L, _EYE_R):
            corners = dst[[a, b]] + alpha * (aligned[[a, b]] - dst[[a, b]])
            e = _similarity(dst[[a, b]], corners)
            out[idx] = dst[idx] @ e[:, :2].T + e[:, 2]
        t = _mouth_stretch(dst, aligned, alpha)
        out[_MOUTH[0]] = dst[_MOUTH[0]] @ t[:, :2].T + t[:, 2]
        # Lip thickness and outline (the cupid's bow) are the source's: each outer lip point sits
        # at its inner-lip anchor plus the source's inner-to-outer offset.
        anchor_out, anchor_src, anchor_dst = (_lip_anchors(p) for p in (out, aligned, dst))
        offset = alpha * (aligned[_OUTER_LIP] - anchor_src) + (1 - alpha) * (dst[_OUTER_LIP] - anchor_dst)
        out[_OUTER_LIP] = anchor_out + offset
    contour = hull_pts.reshape(-1, 1, 2).astype(np.float32)
    for i in _INNER:
        if cv2.pointPolygonTest(contour, (float(out[i, 0]), float(out[i, 1])), False) < 0:
            out[i] = dst[i]
    return out.astype(np.float32)


def _nose_fit(dst: np.ndarray, aligned: np.ndarray, alpha: float) -> np.ndarray:
    """The source's nose (width, shape, sideways placement) fitted to the target's nose length.

    Along the eye line the nose points move toward the (aligned) source's; along the face's
    vertical they keep the target's bridge top (27) and base (33) and take the source's shape
    scaled into that length. The vertical length is mostly head pitch (the kling clip's raised
    chin shortens it by ~20 % of the face against a frontal source), not identity. A source's
    longer nose used to come down toward the target's mouth (which keeps its place), squashing
    the philtrum so dlib read the lips lower and closed; the hold that replaced it lifted the
    whole nose instead, bridge top included, which folded the skin between the eyes and cost
    eye-opening correlation (kling with Tom Hanks: 0.65 before the hold, 0.57 with it, 0.63 with
    this fit; the mouth's 0.85 kept; docs/measurements/classical_swap.md)."""
    ex = dst[45] - dst[36]
    u = ex / max(float(np.linalg.norm(ex)), 1e-6)
    down = np.array([-u[1], u[0]])           # perpendicular to the eye line, toward the chin
    rd, ra = dst[_NOSE] - dst[27], aligned[_NOSE] - aligned[27]
    len_d, len_a = float(rd[33 - 27] @ down), float(ra[33 - 27] @ down)
    k = len_d / len_a if len_a > 1e-6 and len_d > 1e-6 else 1.0
    across = (1 - alpha) * (rd @ u) + alpha * (ra @ u + float((aligned[27] - dst[27]) @ u))
    along = (1 - alpha) * (rd @ down) + alpha * k * (ra @ down)
    return dst[27] + across[:, None] * u[None] + along[:, None] * down[None]


def _lip_anchors(pts: np.ndarray) -> np.ndarray:
    """Points on the inner lip contour facing each outer lip point (49-53, 55-59)."""
    return np.stack([(pts[a] + pts[b]) / 2 for a, b in _LIP_ANCHORS])


def _mouth_stretch(dst: np.ndarray, aligned: np.ndarray, alpha: float) -> np.ndarray:
    """2x3 affine stretching the target's mouth along its corner axis, about the corners'
    midpoint, to the (aligned) source's mouth width; perpendicular distances are unchanged."""
    _, a, b = _MOUTH
    axis = dst[b] - dst[a]
    width = max(float(np.linalg.norm(axis)), 1e-6)
    u = axis / width
    ratio = float(np.linalg.norm(aligned[b] - aligned[a])) / width
    # A face whose mouth is squeezed by a turn can give absurd ratios: stay near the target's.
    ratio = 1.0 + alpha * (float(np.clip(ratio, 0.75, 1.33)) - 1.0)
    lin = np.eye(2) + (ratio - 1.0) * np.outer(u, u)
    c = (dst[a] + dst[b]) / 2
    return np.hstack([lin, (c - lin @ c)[:, None]])


def target_mouth(warped, patch, dst68, moved68, size: float) -> np.ndarray:
    """Paint the target's mouth interior (inside the inner lip contour, points 60-67) into
    ``warped`` where the moved mouth has it: the target patch goes through the same stretch that
    moved its lips, so teeth stay between the lips they belong to."""
    inner = np.rint(moved68[_INNER_MOUTH]).astype(np.int32)
    m = np.zeros(warped.shape[:2], np.uint8)
    cv2.fillPoly(m, [inner], 1)
    if m.sum() < 4:                      # closed mouth: nothing between the lips
        return warped
    t = cv2.estimateAffine2D(dst68[48:68].astype(np.float32), moved68[48:68].astype(np.float32))[0]
    # dlib's inner contour often runs on the lip itself (lipstick would show as a rim inside the
    # source's lips): keep only the part well inside it, with a soft edge.
    return _blend_inside(warped, patch, t, m, round(0.015 * size), max(0.5, 0.008 * size))


def _blend_inside(warped, patch, t, m, erode: int, sigma: float, weight: float = 1.0) -> np.ndarray:
    """``patch`` moved by the affine ``t`` (None: in place) blended into ``warped`` over ``m``
    (uint8 0/1) shrunk by ``erode`` px, its edge softened by ``sigma`` and cut at ``m``;
    ``warped`` unchanged where too little is left. Computed in the box around ``m`` padded past
    the blur's reach (zeros there, as in the whole patch), so the cost is the feature's, not the
    face's."""
    x, y, w, h = cv2.boundingRect(m)
    if w == 0 or h == 0:
        return warped
    pad = erode + int(np.ceil(4 * sigma)) + 2
    x0, y0 = max(0, x - pad), max(0, y - pad)
    x1, y1 = min(m.shape[1], x + w + pad), min(m.shape[0], y + h + pad)
    box = m[y0:y1, x0:x1]
    core = cv2.erode(box, np.ones((2 * erode + 1, 2 * erode + 1), np.uint8)) if erode > 0 else box
    if core.sum() < 4:
        return warped
    soft = (cv2.GaussianBlur(core.astype(np.float32), (0, 0), sigma) * box * weight)[..., None]
    if t is None:
        src = patch[y0:y1, x0:x1]
    else:
        shifted = np.asarray(t, np.float64).copy()
        shifted[:, 2] -= (x0, y0)
        src = cv2.warpAffine(patch, shifted, (x1 - x0, y1 - y0), flags=cv2.INTER_LINEAR,
                             borderMode=cv2.BORDER_REPLICATE)
    out = warped.copy()
    out[y0:y1, x0:x1] = warped[y0:y1, x0:x1] * (1 - soft) + src * soft
    return out


# Target eye over source eye opening from which the eyeball between the lids is the target's
# (fully at EYE_STRETCH[1]). Where the target's eye is much more open than the source's, the warp
# stretches the source's lash line and lid shadow over the opening: a heavy-lidded source on a
# wide-eyed target (the flf2v portrait: 0.18-0.24 against 0.36-0.38) came out with two dark
# almond holes and no iris or white. Below the ramp the source's eye is untouched.
EYE_STRETCH = (1.3, 1.7)


def target_eyes(warped, patch, dst68, moved68, src68, size: float) -> np.ndarray:
    """Paint the target's eyeball (iris and white, inside the lid contour) into ``warped`` for each
    eye the warp had to open much wider than the source's (``EYE_STRETCH``): the source has no
    pixels for what the target's open lids show. The target's eye goes through the similarity that
    moved its corners, so it sits between the lids it belongs to; the lid margins stay the
    source's."""
    ratio = eye_aspect(dst68) / np.maximum(eye_aspect(src68), 0.02)
    weight = np.clip((ratio - EYE_STRETCH[0]) / (EYE_STRETCH[1] - EYE_STRETCH[0]), 0.0, 1.0)
    out = warped
    for w, (idx, a, b) in zip(weight, (_EYE_L, _EYE_R)):
        if w <= 0:
            continue
        m = np.zeros(warped.shape[:2], np.uint8)
        cv2.fillPoly(m, [np.rint(moved68[idx]).astype(np.int32)], 1)
        t = _similarity(dst68[[a, b]].astype(np.float64), moved68[[a, b]].astype(np.float64))
        out = _blend_inside(out, patch, t.astype(np.float32), m, round(0.01 * size), max(0.5, 0.006 * size), w)
    return out
