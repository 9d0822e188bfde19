"""A landmark-based face swap for machines without a neural swapper (no weights beyond dlib's).

For each target face the source face is warped triangle by triangle onto the target's 68
landmarks, colour-matched to the target skin and blended inside the target's face hull. It keeps
the target's face outline, pose and lighting and brings the source's eyes, brows, nose and mouth,
which is what identity models mostly look at.

Everything happens on a patch around the target face: the cost scales with the face, not with
the frame, and nothing outside the returned mask is touched.
"""
from __future__ import annotations

from typing import Sequence

import cv2
import numpy as np

from .faces import Face, SourceIdentity, as_rgb_uint8
from .interfaces import FaceSwapper, SwapPatch

BLEND_MODES = ("seamless", "feather")


def delaunay(points: np.ndarray) -> np.ndarray:
    """(T, 3) vertex indices of the Delaunay triangulation of ``points`` (N, 2)."""
    pts = np.asarray(points, np.float32)
    x0, y0 = np.floor(pts.min(axis=0)) - 2
    x1, y1 = np.ceil(pts.max(axis=0)) + 2
    subdiv = cv2.Subdiv2D((int(x0), int(y0), int(x1 - x0 + 1), int(y1 - y0 + 1)))
    for x, y in pts:
        subdiv.insert((float(x), float(y)))
    tris = []
    for t in subdiv.getTriangleList().reshape(-1, 3, 2):
        # Subdiv2D returns coordinates, not indices, and includes triangles that touch its
        # virtual outer vertices: map back to the nearest input point and drop the rest.
        d = np.linalg.norm(pts[None, :, :] - t[:, None, :], axis=2)
        idx = d.argmin(axis=1)
        if np.all(d[np.arange(3), idx] < 0.5) and len(set(idx.tolist())) == 3:
            tris.append(sorted(idx.tolist()))
    return np.unique(np.array(tris, np.int32).reshape(-1, 3), axis=0)


def reinhard_lab(src: np.ndarray, ref: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Match mean/std of ``src`` to ``ref`` per Lab channel over ``mask``; float RGB 0..255."""
    sel = mask > 0
    if sel.sum() < 16:
        return src
    src_lab = cv2.cvtColor(np.clip(src / 255.0, 0, 1).astype(np.float32), cv2.COLOR_RGB2Lab)
    ref_lab = cv2.cvtColor(np.clip(ref / 255.0, 0, 1).astype(np.float32), cv2.COLOR_RGB2Lab)
    s, r = src_lab[sel], ref_lab[sel]
    s_mean, s_std = s.mean(axis=0), s.std(axis=0)
    r_mean, r_std = r.mean(axis=0), r.std(axis=0)
    # Cap the gain: a flat source region (e.g. an over-exposed cheek) must not explode noise.
    gain = np.clip(r_std / np.maximum(s_std, 1e-3), 0.25, 4.0)
    out = (src_lab - s_mean) * gain + r_mean
    out[..., 0] = np.clip(out[..., 0], 0, 100)
    rgb = cv2.cvtColor(out.astype(np.float32), cv2.COLOR_Lab2RGB)
    return np.clip(rgb * 255.0, 0, 255)


class ClassicalSwapper(FaceSwapper):
    name = "classical_delaunay"
    needs_landmarks = True

    def __init__(self, blend: str = "seamless", color_transfer: bool = True,
                 mask_erosion: float = 0.03, mask_feather: float = 0.08, margin: float = 0.12,
                 forehead: float = 0.0, shape_transfer: float = 0.0, relight: float = 0.0,
                 mirror: str = "never"):
        """``mask_erosion``/``mask_feather``/``margin`` are fractions of the face size (the
        larger side of the target landmarks' box), so results do not depend on resolution."""
        if blend not in BLEND_MODES:
            raise ValueError(f"blend must be one of {BLEND_MODES}, got {blend!r}")
        self.blend = blend
        self.color_transfer = bool(color_transfer)
        self.mask_erosion = float(mask_erosion)
        self.mask_feather = float(mask_feather)
        self.margin = float(margin)
        self.forehead = float(forehead)
        self.shape_transfer = float(shape_transfer)
        self.relight = float(relight)
        self.mirror = mirror

    def swap(self, images: Sequence[np.ndarray], faces: Sequence[Sequence[Face]],
             source: SourceIdentity) -> list[list[SwapPatch]]:
        if source.image is None or source.face is None or source.face.landmarks is None:
            raise ValueError("the classical swap needs the source image and its face with 68 "
                             "landmarks (SourceIdentity.image / .face.landmarks)")
        src_img = as_rgb_uint8(source.image)
        src68 = _check_landmarks(source.face.landmarks, "source")
        variants = {}
        for flip in (False, True):
            im = src_img[:, ::-1].copy() if flip else src_img
            p68 = _mirror68(src68, src_img.shape[1]) if flip else src68
            pts = _with_forehead(p68, self.forehead)
            variants[flip] = (im, pts, delaunay(pts), yaw(p68))
        out = []
        for image, image_faces in zip(images, faces):
            frame = as_rgb_uint8(image) if image_faces else None
            row = []
            for face in image_faces:
                flip = False
                if self.mirror == "auto":
                    ty = yaw(_check_landmarks(face.landmarks, "target"))
                    flip = abs(ty - variants[True][3]) < abs(ty - variants[False][3])
                im, pts, tris, _ = variants[flip]
                row.append(self._swap_one(frame, face, im, pts, tris))
            out.append(row)
        return out

    def _swap_one(self, frame, face: Face, src_img, src_pts, tris) -> SwapPatch:
        dst68 = _check_landmarks(face.landmarks, "target")
        dst_pts = _with_forehead(dst68, self.forehead)
        if self.shape_transfer > 0:
            dst_pts = _transfer_shape(src_pts, dst_pts, self.shape_transfer)
        h, w = frame.shape[:2]
        lo, hi = dst_pts.min(axis=0), dst_pts.max(axis=0)
        size = float(max(hi - lo))
        pad = max(4.0, self.margin * size)
        x0, y0 = (int(max(0, np.floor(v - pad))) for v in lo)
        x1, y1 = int(min(w, np.ceil(hi[0] + pad))), int(min(h, np.ceil(hi[1] + pad)))
        if x1 - x0 < 2 or y1 - y0 < 2:
            return SwapPatch((0, 0, 0, 0), np.zeros((0, 0, 3), np.float32),
                             np.zeros((0, 0), np.float32), {"skipped": "face outside the frame"})
        patch = frame[y0:y1, x0:x1]
        local = dst_pts - np.array([x0, y0], np.float32)
        warped, covered = _piecewise_affine(src_img, src_pts, local, tris, patch.shape[:2])

        hull = np.zeros(patch.shape[:2], np.uint8)
        cv2.fillConvexPoly(hull, cv2.convexHull(np.rint(local).astype(np.int32)), 1)
        # Folded or concave mesh borders can leave hull pixels without a source pixel.
        hard = hull & covered
        erosion_px = self.mask_erosion * size
        feather_px = max(1.0, self.mask_feather * size)
        sigma = feather_px / 5.0
        # Distances to the hull edge; pixels outside it are 0 and stay exactly 0.
        dist = cv2.distanceTransform(hard, cv2.DIST_L2, 5)
        # The core sits 2.5 sigma inside the eroded edge so the blur has died down to ~0.6%
        # where the hard cut at the hull boundary happens: no visible step.
        core = (dist > erosion_px + 2.5 * sigma).astype(np.float32)
        if core.sum() == 0:       # tiny face: keep at least the hull's inner half
            core = (dist > dist.max() / 2).astype(np.float32)
        mask = cv2.GaussianBlur(core, (0, 0), sigma) * hard.astype(np.float32)

        patch_f = patch.astype(np.float32)
        if self.color_transfer:
            inner = (dist > erosion_px).astype(np.uint8)
            warped = reinhard_lab(warped, patch_f, inner if inner.sum() >= 16 else hard)
        if self.relight > 0:
            warped = _relight(warped, patch_f, hard, self.relight * size)
        if self.blend == "seamless":
            clone_mask = (dist > erosion_px).astype(np.uint8)
            pixels = _seamless(warped, patch, clone_mask if clone_mask.sum() else hard)
        else:
            pixels = warped
        pixels = np.where(hard[..., None] > 0, pixels, patch_f).astype(np.float32)
        mask[mask < 1e-4] = 0.0
        info = {"blend": self.blend, "color_transfer": self.color_transfer,
                "triangles": int(len(tris)), "face_size_px": round(size, 1),
                "erosion_px": round(erosion_px, 2), "feather_px": round(feather_px, 2),
                "mask_area_px": int((mask > 0).sum()),
                "source_face_px": round(float(max(np.ptp(src_pts, axis=0))), 1)}
        return SwapPatch((x0, y0, x1, y1), pixels, mask.astype(np.float32), info)

    def model_files(self) -> list[tuple[str, str]]:
        return []


def _check_landmarks(landmarks, which: str) -> np.ndarray:
    if landmarks is None:
        raise ValueError(f"the classical swap needs 68 landmarks on the {which} face; run the "
                         f"analyzer's landmarks68() first")
    pts = np.asarray(landmarks, np.float32)
    if pts.shape != (68, 2) or not np.all(np.isfinite(pts)):
        raise ValueError(f"{which} landmarks must be finite and shaped (68, 2), got {pts.shape}")
    return pts


_MIRROR68 = np.array(list(range(16, -1, -1)) + list(range(26, 16, -1)) + [27, 28, 29, 30]
                     + [35, 34, 33, 32, 31] + [45, 44, 43, 42, 47, 46, 39, 38, 37, 36, 41, 40]
                     + [54, 53, 52, 51, 50, 49, 48, 59, 58, 57, 56, 55] + [64, 63, 62, 61, 60]
                     + [67, 66, 65])


def _mirror68(pts, width):
    out = pts[_MIRROR68].copy()
    out[:, 0] = width - 1 - out[:, 0]
    return out


def yaw(pts68) -> float:
    eye_l, eye_r = pts68[36:42].mean(axis=0), pts68[42:48].mean(axis=0)
    axis = (eye_r - eye_l) / max(np.linalg.norm(eye_r - eye_l), 1e-6)
    left, right, nose = (float(np.dot(pts68[i], axis)) for i in (0, 16, 30))
    return (nose - (left + right) / 2) / max(right - left, 1e-6)


def _masked_blur(img, mask, sigma):
    m = mask.astype(np.float32)
    num = cv2.GaussianBlur(img * m[..., None], (0, 0), sigma)
    den = cv2.GaussianBlur(m, (0, 0), sigma)
    return num / np.maximum(den, 1e-4)[..., None]


def _relight(warped, patch, mask, sigma):
    return np.clip(warped - _masked_blur(warped, mask, sigma) + _masked_blur(patch, mask, sigma), 0, 255)


def _with_forehead(pts68: np.ndarray, amount: float) -> np.ndarray:
    if amount <= 0:
        return pts68
    eyes = pts68[36:48].mean(axis=0)
    up = eyes - pts68[8]
    return np.concatenate([pts68, pts68[17:27] + amount * up]).astype(np.float32)


def _transfer_shape(src_pts, dst_pts, alpha):
    src = src_pts.astype(np.float64); dst = dst_pts.astype(np.float64)
    m, _ = cv2.estimateAffinePartial2D(src, dst)
    aligned = src @ m[:, :2].T + m[:, 2]
    out = dst.copy()
    inner = np.arange(27, 68)
    out[inner] = dst[inner] + alpha * (aligned[inner] - dst[inner])
    hull = cv2.convexHull(dst.astype(np.float32))
    for i in inner:
        if cv2.pointPolygonTest(hull, (float(out[i, 0]), float(out[i, 1])), False) < 0:
            out[i] = dst[i]
    return out.astype(np.float32)


def _piecewise_affine(src_img, src_pts, dst_pts, tris, shape):
    """Warp ``src_img`` so ``src_pts`` land on ``dst_pts`` (patch coordinates), per triangle.

    Rather than warpAffine per triangle bounding rect (seams where triangles meet, one
    interpolation pass each), every patch pixel is labelled with its target triangle, its
    source position comes from that triangle's inverse affine, and one remap samples it.
    Returns (float32 RGB patch, uint8 coverage mask).
    """
    h, w = shape
    label = np.full((h, w), -1, np.int32)
    affines = np.zeros((len(tris), 2, 3), np.float32)
    for k, tri in enumerate(tris):
        d = dst_pts[tri].astype(np.float32)
        area = (d[1, 0] - d[0, 0]) * (d[2, 1] - d[0, 1]) - (d[2, 0] - d[0, 0]) * (d[1, 1] - d[0, 1])
        if abs(area) < 1e-3:      # collapsed on the target: covers no pixel, no inverse
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
    # A tight source crop may not contain the whole source hull (jaw cut off): never paste
    # pixels that only exist as a smeared image border.
    sh, sw = src_img.shape[:2]
    valid = (label >= 0) & (map_x >= 0) & (map_y >= 0) & (map_x <= sw - 1) & (map_y <= sh - 1)
    return warped.astype(np.float32), valid.astype(np.uint8)


def _seamless(warped: np.ndarray, patch: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Poisson-blend ``warped`` into ``patch`` inside ``mask``; float32 RGB 0..255."""
    # seamlessClone needs the mask's bounding box (plus one pixel) inside the destination,
    # which fails for faces cut by the frame edge: pad everything first, crop afterwards.
    p = 3
    src = cv2.copyMakeBorder(np.clip(warped + 0.5, 0, 255).astype(np.uint8), p, p, p, p,
                             cv2.BORDER_REFLECT)
    dst = cv2.copyMakeBorder(np.ascontiguousarray(patch), p, p, p, p, cv2.BORDER_REFLECT)
    m = cv2.copyMakeBorder(mask * 255, p, p, p, p, cv2.BORDER_CONSTANT, value=0)
    bx, by, bw, bh = cv2.boundingRect(m)
    # OpenCV places the mask's bounding box at center - (bw//2, bh//2): this centre keeps the
    # clone exactly in place (checked on OpenCV 5.0).
    out = cv2.seamlessClone(src, dst, m, (bx + bw // 2, by + bh // 2), cv2.NORMAL_CLONE)
    return out[p:-p, p:-p].astype(np.float32)
