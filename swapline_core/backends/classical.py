"""A landmark-based face swap for machines without a neural swapper (no weights beyond dlib's).

For each target face the source face is warped triangle by triangle onto the target's 68
landmarks (plus a band of forehead), colour-matched to the target skin and blended inside the
target's face hull. The face outline, hair and pose stay the target's; eyes, brows, nose, mouth
and their proportions come from the source, which is what identity models mostly look at. Hair
over the source's forehead (curls, a fringe) or falling across its cheeks is not pasted: the
target's own skin stays there.

Expression is the target's: each eye keeps its lid shape (openness) and the mouth its lip gap
and shape, moved to the source's eye corners and mouth width; lip thickness comes from the
source; an open mouth shows the target's own teeth and gap, and an eye much more open than the
source's its own iris and white (a heavy-lidded source's lashes are not stretched over it).
Identity therefore rests on texture and static proportions (eye spacing and size, nose, mouth
width, lips, forehead).

The defaults and their alternatives (forehead band, shape transfer, mirroring, blend, the old
source-expression transfer) are measured by ``calibration/calibrate_classical.py``: identity margins on
t1.jpg with Tom Hanks as the source and mouth/eye-opening correlations on the sample clips, in
docs/measurements/classical_swap.md. Where the swap is usable at all (head turn, pitch, face
size) is declared in ``ClassicalSwapper.competence`` and enforced by ``swapline_core.guards``.

Everything happens on a patch around the target face: cost scales with the face, not the frame,
and nothing outside the returned mask is touched (the mask is exactly 0 outside the hull). A face
well larger than the source's face and than WORK_FACE px is rendered at that size and scaled up, with
its hull, mask edge, open mouth and eyes at full resolution: the source has no finer texture.
"""
from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from ..faces.shape import MEAN68, MIRROR68
from ..interfaces import FaceSwapper
from ..parallel import map_frames
from ..types import OUTSIDE_FRAME, Competence, Face, SourceIdentity, SwapPatch, as_rgb_uint8
from .classical_blend import (
    clone_drift,
    colourless,
    forehead_edge,
    forehead_skin,
    relight,
    relight_forehead,
    seamless,
    source_occlusion,
    target_chroma,
)
from .classical_expression import target_eyes, target_mouth, transfer_shape

BLEND_MODES = ("seamless", "feather")
MIRROR_MODES = ("auto", "never", "always")

_MIRROR68 = MIRROR68


FOREHEAD_RELIGHT = 0.1     # relight scale (of face size) above the brows
# Face size (px, the 68 points' larger extent) below which a face is rendered at full resolution;
# larger faces are rendered at the larger of this and the source's face size (``_swap_one``), where
# that shrinks them below WORK_GAIN of their size (a resample for a few % of the cost is not worth it).
WORK_FACE, WORK_GAIN = 160.0, 0.8


class ClassicalSwapper(FaceSwapper):
    name = "classical_delaunay"
    needs_landmarks = True
    # Its own Lab transfer (capped gain), relighting and Poisson blend already put the target's
    # colour in; a second, uncapped match at paste time turned a grey source's low-chroma skin
    # into cyan and red blotches on the red-lit kling clip.
    matches_color = True
    # A frontal source warped by 2D triangles: past a three-quarter turn the far eye lands beside
    # the nose (infinitetalk's man at 50-62 deg by the five points: visibly wrong; kling's
    # 12-27 deg: fine; see docs/measurements/classical_swap.md). Pitch: the kling clip reaches
    # 37 deg without artefacts; nothing steeper was available to measure. dlib's 68 points need
    # eyes ~12 px apart (a ~35 px face) to land on the features at all.
    competence = Competence(max_yaw=45.0, max_pitch=45.0, min_inter_ocular_px=12.0, needs_both_eyes=True,
                            basis="measured on the sample clips and t1.jpg (calibration/calibrate_classical.py)")

    def __init__(self, blend: str = "seamless", color_transfer: bool = True,
                 mask_erosion: float = 0.0, mask_feather: float = 0.04, margin: float = 0.12,
                 forehead: float = 0.3, shape_transfer: float = 1.0, relight: float = 0.25,
                 mirror: str = "auto", expression: bool = True, occlusion: bool = True):
        """Sizes are fractions of the face size (the larger side of the target landmarks' box),
        so results do not depend on resolution.

        blend: "seamless" (Poisson clone, then the soft mask) or "feather" (soft mask only).
        mask_erosion: how far inside the hull the mask starts to fall off.
        mask_feather: width of the soft edge, entirely inside the hull.
        forehead: height of the forehead band above the brows, in eye-to-chin units.
        shape_transfer: 0 keeps the target's feature positions, 1 uses the source's.
        relight: scale (of face size) below which shading comes from the target; 0 disables.
        mirror: flip the source when that brings its head turn closer to the target's.
        expression: eye and mouth opening and the mouth's shape follow the target (only the
            features' placement and size come from the source), and the mouth interior is the
            target's own; False copies the source's expression (closed mouth on a talking face).
        occlusion: what covers the source's face (hair on the forehead or across a cheek, a
            brim) is not pasted; the target's own skin stays there.
        """
        if blend not in BLEND_MODES:
            raise ValueError(f"blend must be one of {BLEND_MODES}, got {blend!r}")
        if mirror not in MIRROR_MODES:
            raise ValueError(f"mirror must be one of {MIRROR_MODES}, got {mirror!r}")
        self.blend, self.mirror = blend, mirror
        self.color_transfer = bool(color_transfer)
        self.mask_erosion, self.mask_feather = float(mask_erosion), float(mask_feather)
        self.margin, self.forehead = float(margin), float(forehead)
        self.shape_transfer = float(np.clip(shape_transfer, 0.0, 1.0))
        self.relight = float(relight)
        self.expression = bool(expression)
        self.occlusion = bool(occlusion)

    @property
    def settings(self) -> tuple:
        """Everything that changes the output, for the stage keys (swap chunks made with other
        settings are never reused on resume)."""
        return (self.blend, self.color_transfer, round(self.mask_erosion, 4), round(self.mask_feather, 4),
                round(self.margin, 4), round(self.forehead, 4), round(self.shape_transfer, 4),
                round(self.relight, 4), self.mirror, self.expression, self.occlusion, WORK_FACE, WORK_GAIN)

    def swap(self, images: Sequence[np.ndarray], faces: Sequence[Sequence[Face]],
             source: SourceIdentity) -> list[list[SwapPatch]]:
        if source.image is None or source.face is None or source.face.landmarks is None:
            raise ValueError("the classical swap needs the source image and its face with 68 "
                             "landmarks (SourceIdentity.image / .face.landmarks)")
        src_img = as_rgb_uint8(source.image)
        src68 = _check_landmarks(source.face.landmarks, "source")
        keep = self._source_keep(src_img, src68)
        grey = colourless(src_img, src68)
        # Both orientations are prepared once per call; each face picks one. The source's
        # keep mask (hair over its forehead) rides along as a 4th channel: warped by the very
        # same triangles as the image, in the same remap.
        variants = {}
        for flip in (False, True):
            p68 = _mirror68(src68, src_img.shape[1]) if flip else src68
            pts = _with_forehead(p68, self.forehead)
            img = src_img if keep is None else np.dstack([src_img, keep])
            img = np.ascontiguousarray(img[:, ::-1]) if flip else img
            variants[flip] = (img, pts, mesh(self.forehead), yaw(p68))

        def one_frame(item) -> list[SwapPatch]:
            image, image_faces = item
            frame = as_rgb_uint8(image) if image_faces else None
            row = []
            for face in image_faces:
                dst68 = _check_landmarks(face.landmarks, "target")
                flip = self.mirror == "always"
                if self.mirror == "auto":
                    t = yaw(dst68)
                    flip = abs(t - variants[True][3]) < abs(t - variants[False][3])
                row.append(self._swap_one(frame, dst68, *variants[flip][:3], mirrored=flip, grey=grey))
            return row

        return map_frames(one_frame, zip(images, faces))

    def _source_keep(self, src_img: np.ndarray, src68: np.ndarray) -> np.ndarray | None:
        """uint8 0..255 map of the source that may be pasted (hair over its forehead or cheeks is not:
        ``classical_blend.source_occlusion``), or None where nothing is covered."""
        if self.forehead <= 0 or not self.occlusion:
            return None
        size = float(np.ptp(src68, axis=0).max())
        hull = np.zeros(src_img.shape[:2], np.uint8)
        cv2.fillConvexPoly(hull, np.rint(cv2.convexHull(src68)).astype(np.int32).reshape(-1, 2), 1)
        keep, share = source_occlusion(src_img, src68, _with_forehead(src68, self.forehead),
                                       skin_sample(hull, src68, size), size)
        return None if share <= 0 else np.rint(keep * 255).astype(np.uint8)

    # The per-face steps in their order (warp, mask, colour, relight, clone, mouth); each is a helper.
    def _swap_one(self, frame, dst68, src_img, src_pts, tris, mirrored: bool, grey: bool = False) -> SwapPatch:
        dst_pts = _with_forehead(dst68, self.forehead)
        hull_pts = cv2.convexHull(dst_pts.astype(np.float32)).reshape(-1, 2)
        if self.shape_transfer > 0:
            dst_pts = transfer_shape(src_pts, dst_pts, hull_pts, self.shape_transfer, self.expression)
        h, w = frame.shape[:2]
        lo, hi = dst68.min(axis=0), dst68.max(axis=0)
        size = float(max(hi - lo))
        lo, hi = np.minimum(lo, dst_pts.min(axis=0)), np.maximum(hi, dst_pts.max(axis=0))
        pad = max(4.0, self.margin * size)
        x0, y0 = int(max(0, np.floor(lo[0] - pad))), int(max(0, np.floor(lo[1] - pad)))
        x1, y1 = int(min(w, np.ceil(hi[0] + pad))), int(min(h, np.ceil(hi[1] + pad)))
        if x1 - x0 < 2 or y1 - y0 < 2:
            return SwapPatch.refusal(OUTSIDE_FRAME)
        patch = frame[y0:y1, x0:x1]
        origin = np.array([x0, y0], np.float32)
        # Rasterised from integer frame coordinates, reported in ``info`` exactly as used.
        hull_int = np.rint(hull_pts).astype(np.int32)
        hull = np.zeros(patch.shape[:2], np.uint8)
        cv2.fillConvexPoly(hull, hull_int - np.array([x0, y0], np.int32), 1)
        patch_f = patch.astype(np.float32)
        # A face well larger than the source's face and WORK_FACE (WORK_GAIN) is rendered at that size and scaled
        # up: the source has no finer texture to give, and the cost grows with the face's area
        # (a 720p close-up paid 3x the sample's). The hull's cut, the mask's zeros outside it and
        # the target's own mouth and eyes stay at full resolution.
        scale = min(1.0, max(WORK_FACE, float(np.ptp(src_pts[:68], axis=0).max())) / size)
        ph, pw = patch.shape[:2]
        sw, sh = max(2, int(round(pw * scale))), max(2, int(round(ph * scale)))
        if scale < WORK_GAIN and (sw, sh) != (pw, ph):
            k = np.array([sw / pw, sh / ph], np.float32)

            def small(pts):    # pixel centres map to pixel centres, as cv2.resize samples them
                return ((pts - origin + 0.5) * k - 0.5).astype(np.float32)

            hull_s = np.zeros((sh, sw), np.uint8)
            cv2.fillConvexPoly(hull_s, np.rint(small(hull_pts)).astype(np.int32), 1)
            face = self._render(cv2.resize(patch, (sw, sh), interpolation=cv2.INTER_AREA), small(dst68),
                                small(dst_pts), hull_s, size * scale, src_img, src_pts, tris, grey)
            warped = np.clip(cv2.resize(face["warped"], (pw, ph), interpolation=cv2.INTER_CUBIC), 0, 255)
            up = cv2.resize(face["valid"].astype(np.float32), (pw, ph), interpolation=cv2.INTER_LINEAR)
            hard = hull & (up > 0.5).astype(np.uint8)
            mask = np.clip(cv2.resize(face["mask"], (pw, ph), interpolation=cv2.INTER_LINEAR), 0.0, 1.0) * hard
            mask[mask < 1e-4] = 0.0
        else:
            scale = 1.0
            face = self._render(patch, dst68 - origin, dst_pts - origin, hull, size, src_img, src_pts, tris, grey)
            warped, hard, mask = face["warped"], face["hard"], face["mask"]
        if self.expression:
            # Teeth, tongue and the dark of an open mouth are the target's (the source is usually
            # a closed-mouth photo: its lips would be stretched over the gap).
            warped = target_mouth(warped, patch_f, dst68 - origin, dst_pts[:68] - origin, size)
            warped = target_eyes(warped, patch_f, dst68 - origin, dst_pts[:68] - origin, src_pts[:68], size)
        pixels = np.where(hard[..., None] > 0, warped, patch_f).astype(np.float32)
        # source_mouth: the mouth is the source's, warped (closed if the source's was): the mask
        # stack's mouth part keeps the target's open mouth interior by default.
        info = {"blend": self.blend, "color_transfer": self.color_transfer, "source_mouth": True,
                "mirrored": bool(mirrored), "triangles": int(len(tris)),
                "face_size_px": round(size, 1), "work_scale": round(scale, 4),
                "erosion_px": round(self.mask_erosion * size, 2),
                "feather_px": round(max(1.0, self.mask_feather * size), 2), "mask_area_px": int((mask > 0).sum()),
                "source_occluded": round(face["cut"], 4), "colourless_source": bool(grey),
                "clone_drift": round(face["drift"], 3) if self.blend == "seamless" else None,
                "hull": hull_int.tolist()}
        return SwapPatch((x0, y0, x1, y1), pixels, mask.astype(np.float32), info)

    def _render(self, patch, dst68, dst_pts, hull, size, src_img, src_pts, tris, grey) -> dict:
        """The source's face on ``patch`` (landmarks in its coordinates, ``size`` its face size)
        up to the mouth and eyes: warped, colour-matched, relit, cloned. Returns the pixels
        (float32 RGB), the pasteable area ``hard``, the source's valid pixels, the soft mask, the
        share of it cut for the source's hair and the clone's drift."""
        warped, valid = _piecewise_affine(src_img, src_pts, dst_pts, tris, patch.shape[:2])
        keep = None
        if warped.shape[2] == 4:
            warped, keep = warped[..., :3], warped[..., 3:] / 255.0
        hard = hull & valid       # a cropped source or a folded mesh leaves holes: never paste them

        erosion_px = self.mask_erosion * size
        sigma = max(1.0, self.mask_feather * size) / 5.0
        dist = cv2.distanceTransform(hard, cv2.DIST_L2, 5)   # 0 outside the hull, stays 0
        # The core sits 2.5 sigma inside the eroded edge, so where the hard cut at the hull
        # happens the blur is down to ~0.6%: exact zeros outside, no visible step.
        core = (dist > erosion_px + 2.5 * sigma).astype(np.float32)
        if not core.any():        # tiny face: keep the inner half of the hull
            core = (dist > dist.max() / 2).astype(np.float32)
        mask = cv2.GaussianBlur(core, (0, 0), sigma) * hard
        mask[mask < 1e-4] = 0.0
        np.minimum(mask, 1.0, out=mask)   # a blur of ones can round to 1.0000001 (thread-dependent)
        cut = 0.0
        if keep is not None:
            # The source's hair (fringe, curls, a brim) is not pasted: the target's forehead
            # stays there, with the keep map's soft edge.
            total = float(mask.sum())
            mask *= keep[..., 0]
            mask[mask < 1e-4] = 0.0
            cut = 1.0 - float(mask.sum()) / max(total, 1e-6)

        patch_f = patch.astype(np.float32)
        inner = (dist > erosion_px).astype(np.uint8)
        if not inner.any():
            inner = hard
        target_skin = skin_sample(inner, dst68, size)
        if self.color_transfer:
            warped = reinhard_lab(warped, patch_f, inner, (skin_sample(inner, dst_pts[:68], size), target_skin))
            if grey:
                warped = target_chroma(warped, patch_f, size, target_skin, dst68, dst_pts[:68])
        if keep is not None:
            # Under the cut the clone, relighting and edge match see the target's own forehead,
            # not the source's hair: a dark curl's gradients would otherwise shade the skin
            # around it (and the Poisson clone spreads them) where the mask still pastes.
            warped = warped * keep + patch_f * (1.0 - keep)
        if self.relight > 0:
            lit = relight(warped, patch_f, hard, self.relight * size)
            if self.forehead > 0:
                lit = relight_forehead(lit, warped, patch_f, hard, dst68, size, FOREHEAD_RELIGHT * size)
            warped = lit
        drift = 0.0
        if self.blend == "seamless":
            skin_info = forehead_skin(patch_f, hard, dst68, size) if self.forehead > 0 else None
            feathered = warped
            warped = seamless(warped, patch, inner)
            warped, drift = clone_drift(warped, feathered, patch_f, target_skin)
            # On what is pasted (the clone, or the plain warp where clone_drift chose it), from
            # the pasted area's edge: the hull's and that of a hole cut for the source's hair,
            # where the target's own lit forehead shows through.
            pasted = hard if keep is None else (hard & (keep[..., 0] > 0.5)).astype(np.uint8)
            warped = forehead_edge(warped, patch_f, hard, size, skin_info, pasted)
        return {"warped": warped.astype(np.float32), "hard": hard, "valid": valid, "mask": mask,
                "cut": cut, "drift": drift}


def delaunay(points: np.ndarray) -> np.ndarray:
    """(T, 3) vertex indices of the Delaunay triangulation of ``points`` (N, 2)."""
    # scipy (a ComfyUI requirement) rather than cv2.Subdiv2D: Subdiv2D drops the thin triangles
    # of nearly collinear hull points (jaw, brows), leaving holes along the face outline.
    from scipy.spatial import Delaunay

    pts = np.asarray(points, np.float64)
    tris = Delaunay(pts).simplices.astype(np.int32)
    return np.unique(np.sort(tris, axis=1), axis=0)


def yaw(pts68: np.ndarray) -> float:
    """Signed head turn proxy: nose offset from the jaw's middle, in jaw widths (+: image-right)."""
    eye_l, eye_r = pts68[36:42].mean(axis=0), pts68[42:48].mean(axis=0)
    axis = (eye_r - eye_l) / max(float(np.linalg.norm(eye_r - eye_l)), 1e-6)
    left, right, nose = (float(np.dot(pts68[i], axis)) for i in (0, 16, 30))
    return (nose - (left + right) / 2) / max(right - left, 1e-6)


def skin_sample(region: np.ndarray, pts68: np.ndarray, size: float) -> np.ndarray:
    """The pixels of ``region`` that are cheek, nose and forehead skin by the landmarks: the eyes,
    brows and lips (grown by a few % of the face size) taken out, for the colour transfer's means
    (a whole-hull mean counts lipstick, eye make-up and glasses frames as skin colour)."""
    out = region.astype(np.uint8).copy()
    grow = max(1, int(round(0.05 * size)))
    for idx in (range(36, 42), range(42, 48), range(48, 60)):
        cv2.fillPoly(out, [np.rint(pts68[list(idx)]).astype(np.int32)], 0)
    for idx in (range(17, 22), range(22, 27)):
        cv2.polylines(out, [np.rint(pts68[list(idx)]).astype(np.int32)], False, 0, thickness=2 * grow)
    holes = cv2.dilate((region > 0).astype(np.uint8) - out, np.ones((2 * grow + 1,) * 2, np.uint8))
    out[holes > 0] = 0
    return out if out.sum() >= 16 else region


def _robust_mean(lab: np.ndarray) -> np.ndarray:
    """Mean per Lab channel of the pixels within 2.5 robust sigmas of the median in every channel:
    highlights, shadows under the frames, hair and stray make-up do not count as skin."""
    med = np.median(lab, axis=0)
    mad = np.median(np.abs(lab - med), axis=0) * 1.4826
    keep = (np.abs(lab - med) <= 2.5 * np.maximum(mad, 1.0)).all(axis=1)
    return (lab[keep] if keep.sum() >= 16 else lab).mean(axis=0)


def reinhard_lab(src: np.ndarray, ref: np.ndarray, mask: np.ndarray,
                 skin: tuple[np.ndarray, np.ndarray] | None = None, stats_pixels: int | None = None) -> np.ndarray:
    """Match ``src`` to ``ref`` per Lab channel; float RGB 0..255. The spread (std) ratio is taken
    over ``mask`` (the whole face: features and all, so the eyes and brows keep their contrast);
    the means over ``skin`` = (source skin, target skin) masks where given (``skin_sample``), else
    over ``mask``. ``stats_pixels``: read the means and spreads on at most this many pixels of
    each set, evenly spread (a 350 px face's took milliseconds; the image is still converted whole:
    the caller's later blurs read the pixels around the mask too)."""
    sel = mask > 0
    if sel.sum() < 16:
        return src
    src_lab = cv2.cvtColor(np.clip(src / 255.0, 0, 1).astype(np.float32), cv2.COLOR_RGB2Lab)
    ref_lab = cv2.cvtColor(np.clip(ref / 255.0, 0, 1).astype(np.float32), cv2.COLOR_RGB2Lab)

    def pick(lab: np.ndarray, m: np.ndarray) -> np.ndarray:
        idx = np.flatnonzero(m)         # integer indexing: boolean indexing of (h, w, 3) is slow
        if stats_pixels:
            idx = idx[::max(1, len(idx) // stats_pixels)]
        return np.take(lab.reshape(-1, 3), idx, axis=0)

    s, r = pick(src_lab, sel), pick(ref_lab, sel)
    s_mean, r_mean = s.mean(axis=0), r.mean(axis=0)
    if skin is not None and (skin[0] > 0).sum() >= 16 and (skin[1] > 0).sum() >= 16:
        s_mean, r_mean = _robust_mean(pick(src_lab, skin[0] > 0)), _robust_mean(pick(ref_lab, skin[1] > 0))
    # Capped gain: a grey source has ~0 chroma spread, which must not blow up into noise; and a
    # colour source's chroma is never spread wider than it is (the red-lit kling target's face
    # spreads a* widely: a gain up to 4 turned a colour source's stubble and cheeks orange-red).
    gain = np.clip(r.std(axis=0) / np.maximum(s.std(axis=0), 1e-3), 0.25, (4.0, 1.0, 1.0))
    out = (src_lab - s_mean) * gain + r_mean
    out[..., 0] = np.clip(out[..., 0], 0, 100)
    return np.clip(cv2.cvtColor(out.astype(np.float32), cv2.COLOR_Lab2RGB) * 255.0, 0, 255)


def _check_landmarks(landmarks, which: str) -> np.ndarray:
    if landmarks is None:
        raise ValueError(f"the classical swap needs 68 landmarks on the {which} face; run the "
                         f"analyzer's landmarks68() first")
    pts = np.asarray(landmarks, np.float32)
    if pts.shape != (68, 2) or not np.all(np.isfinite(pts)):
        raise ValueError(f"{which} landmarks must be finite and shaped (68, 2), got {pts.shape}")
    return pts


def _mirror68(pts: np.ndarray, width: int) -> np.ndarray:
    out = pts[_MIRROR68].copy()
    out[:, 0] = width - 1 - out[:, 0]
    return out


def _with_forehead(pts68: np.ndarray, amount: float) -> np.ndarray:
    """Append brow points lifted along the chin-to-eyes direction: the 68-point hull stops at
    the brows, which leaves the target's whole forehead (a strong identity cue) in place."""
    if amount <= 0:
        return pts68
    up = pts68[36:48].mean(axis=0) - pts68[8]
    return np.concatenate([pts68, pts68[17:27] + amount * up]).astype(np.float32)


def mesh(forehead: float) -> np.ndarray:
    """The fixed triangulation used for every face: Delaunay on the mean shape with the mouth and
    eyes held open, so the inner lip contour and the lid contours are triangle edges and an
    opening on the target maps to the (possibly closed) source without folding the lips."""
    key = round(float(forehead), 6)
    if key not in _MESHES:
        ref = MEAN68.astype(np.float64).copy()
        ref[[61, 62, 63], 1] -= 0.06
        ref[[65, 66, 67], 1] += 0.08
        ref[[37, 38, 43, 44], 1] -= 0.04
        ref[[40, 41, 46, 47], 1] += 0.04
        _MESHES[key] = delaunay(_with_forehead(ref.astype(np.float32), forehead))
    return _MESHES[key]


_MESHES: dict[float, np.ndarray] = {}


def _piecewise_affine(src_img, src_pts, dst_pts, tris, shape):
    """Warp ``src_img`` so ``src_pts`` land on ``dst_pts`` (patch coordinates), per triangle.

    Instead of one warpAffine per triangle bounding rect (seams where triangles meet, one
    interpolation pass each), every patch pixel is labelled with its target triangle, gets its
    source position from that triangle's inverse affine, and a single remap samples them all.
    Returns (float32 RGB patch, uint8 mask of pixels with a real source pixel).
    """
    h, w = shape
    label = np.full((h, w), -1, np.int32)
    affines = np.zeros((len(tris), 2, 3), np.float32)
    for k, tri in enumerate(tris):
        d = dst_pts[tri].astype(np.float32)
        area = (d[1, 0] - d[0, 0]) * (d[2, 1] - d[0, 1]) - (d[2, 0] - d[0, 0]) * (d[1, 1] - d[0, 1])
        if abs(area) < 1e-3:      # collapsed on the target: covers no pixel, has no inverse
            continue
        affines[k] = cv2.getAffineTransform(d, src_pts[tri].astype(np.float32))
        cv2.fillConvexPoly(label, np.rint(d).astype(np.int32), int(k))
    ys, xs = np.nonzero(label >= 0)
    a = affines[label[ys, xs]]
    map_x = np.full((h, w), -1.0, np.float32)
    map_y = np.full((h, w), -1.0, np.float32)
    map_x[ys, xs] = a[:, 0, 0] * xs + a[:, 0, 1] * ys + a[:, 0, 2]
    map_y[ys, xs] = a[:, 1, 0] * xs + a[:, 1, 1] * ys + a[:, 1, 2]
    warped = cv2.remap(src_img, map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    # A tight source crop may not hold the whole source hull (a cut-off jaw): never paste
    # pixels that exist only as a smeared image border.
    sh, sw = src_img.shape[:2]
    valid = (label >= 0) & (map_x >= 0) & (map_y >= 0) & (map_x <= sw - 1) & (map_y <= sh - 1)
    return warped.astype(np.float32), valid.astype(np.uint8)
