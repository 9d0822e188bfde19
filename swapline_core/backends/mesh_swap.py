"""A dense-mesh face swap for machines without a neural swapper: MediaPipe's 468-point mesh.

The source photo's texture is mapped through the mesh's 852 triangles onto each target face's
mesh: forehead, cheeks, nose and chin all come from the source's own skin (the mesh covers
hairline to chin), placed where the target's mesh puts them. The geometry is therefore entirely
the target's (its outline, pose and expression); identity rests on the source's texture alone,
unlike the 68-point ``classical`` swapper, which also moves the features to the source's
proportions. The target keeps its eyes (the eye opening and the lid edge around it) and the inside
of its mouth (inside the inner lip contour): the mesh leaves both as holes, widened a little here
so the lashes and the lip line stay the target's.

Turned heads: a triangle facing away from the camera in the source (folded behind the nose or the
cheek) takes its texture from its mirror partner on the other half of the face (``mesh_mirror``),
brought to meet the texture beside it (``mesh_blend.mirror_seam``).
Only back-facing ones do: mirroring merely squeezed triangles too put the other side's light into
a patchwork beside the nose (seen by eye on the f_blonde_smile source). A triangle facing away in
the target is hidden on the real head and is never pasted: where it shows, the mesh overshot.

Sharpness: the source photo is shrunk to about the target face's size before the warp samples
it (``prefiltered``: no aliasing), and the warped texture is blurred until it is no sharper than
the target (``mesh_blend.match_sharpness``: a sharp photo on a small or soft face read as a
pasted patch).

Colour: the source's texture is matched to the target's skin in Lab (``classical.reinhard_lab``,
means over the skin triangles only: no eyes, brows or lips), relit with the target's shading read
on plain skin only (``mesh_blend.skin_shading``), then brought to the target's colour along the
paste's edge by a smooth membrane (``mesh_blend.membrane``), its fine texture on plain skin toned
down to the target's (``mesh_blend.match_detail``: stubble on a smooth face read as dirt) and
feathered. What in the source is not its skin (hair across the face, a hand, a helmet's striped
rim: ``mesh_blend.source_skin``) is not pasted.

Both meshes come from the mesh model run here (``MeshAnalyzer.track``): the target's at each
tracked face's box and five points, so the faces may come from any analyzer; the source's once per
source image (cached). No dlib 68-point predictor is read: every model is Apache-2.0 (MediaPipe).
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence

import cv2
import numpy as np

from ..interfaces import FaceSwapper
from ..parallel import map_frames
from ..types import OUTSIDE_FRAME, Competence, Face, SourceIdentity, SwapPatch, as_rgb_uint8
from . import face_mesh as fm
from .classical import reinhard_lab
from .mesh_blend import (
    BUSY_TIMES,
    DETAIL_GAIN,
    DETAIL_SCALE,
    STATS_PIXELS,
    match_detail,
    match_sharpness,
    membrane,
    mirror_seam,
    skin_shading,
    source_skin,
)
from .mesh_mirror import mirror_map

# MediaPipe's lip contours (FACEMESH_LIPS): the inner one bounds the mouth's hole in the mesh.
LIPS_INNER = (78, 95, 88, 178, 87, 14, 317, 402, 318, 324, 308, 415, 310, 311, 312, 13, 82, 81, 80, 191)
LIPS_OUTER = (61, 146, 91, 181, 84, 17, 314, 405, 321, 375, 291, 409, 270, 269, 267, 0, 37, 39, 40, 185)
# The nose's underside (nostrils, alae, tip): the target's own stays, like its eyes and the inside
# of its mouth: the source's nostrils, a few pixels off where the target's are, showed as dark
# specks beside them (shipped_grey on the labelled clips). Around it the source is never judged
# as "not skin" (``mesh_blend.source_skin``): nostrils are dark in every photo.
NOSE_UNDER = (1, 2, 19, 20, 44, 45, 48, 59, 60, 64, 75, 79, 94, 97, 98, 99, 115, 125, 141, 166, 218, 219,
              220, 237, 238, 239, 240, 241, 242, 250, 274, 275, 278, 289, 290, 294, 305, 309, 326, 327, 328,
              344, 354, 370, 392, 438, 439, 440, 457, 458, 459, 460, 461, 462)
# The face oval's upper half (temple to temple over the hairline): on most photos these
# triangles hold hair, at the source's hairline and on the target's (dark blotches at the temples
# and a hair line across the forehead on the sample clips), so they are never pasted.
UPPER_OVAL = (10, 338, 297, 332, 284, 251, 389, 356, 454, 234, 127, 162, 21, 54, 103, 67, 109)
# A source triangle showing less than this share of its area in the photo (behind the nose or the
# near cheek of a turned source: ``visible_share``) is textured from its mirror partner too.
HIDDEN_SHARE = 0.5
BLENDS = ("membrane", "feather")
# Below this mesh face presence a tracked box holds no face the mesh can place (MediaPipe's own
# tracking threshold, as the mesh analyzer uses it).
PRESENCE = 0.5
# The finest scale, in pixels, at which the target's shading replaces the source's: the mesh
# lands within a pixel or two, so finer than this the "shading" is the target's own features
# (brows, lids) leaking through its plain-skin triangles; on a 30 px face 6 % of its size (2 px)
# handed back nearly the whole target, and the gate refused the face as hardly changed (12 of the
# luma guitarist's faces). 6 px left the source's highlights and side shadows on small faces (a
# 6 px blur's detail band spans a third of a 50 px face); 4 px, with the source prefiltered and
# softened to the target's sharpness, was labelled better (round mixed-9, path mesh7).
SHADING_MIN_PX = 4.0
# A source face more than this many times the target's size is shrunk (area average) before the
# warp samples it: bilinear sampling of a 3x larger photo skips pixels, and the aliased texture
# read as blocky specks on small faces. (The aliasing also counted as change: on faces of about
# 20 px the result now often changes too little of the face for the gate to call it swapped.)
PREFILTER_RATIO = 1.19


def prefiltered(src_img: np.ndarray, src: np.ndarray, size: float,
                levels: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(the source photo and its mesh points) shrunk to about the target face's ``size``, in
    quarter-octave steps, when the source face is larger than PREFILTER_RATIO x that. ``levels``
    keeps each step's shrunk photo for the next face of the same source (``MeshSwapper.swap``)."""
    src_size = float(max(src.max(axis=0) - src.min(axis=0)))
    ratio = src_size / max(size, 1.0)
    if ratio < PREFILTER_RATIO:
        return src_img, src
    f = 2.0 ** -(np.floor(np.log2(ratio) * 4.0) / 4.0)
    small = None if levels is None else levels.get(f)
    if small is None:
        h, w = src_img.shape[:2]
        small = cv2.resize(src_img, (max(1, round(w * f)), max(1, round(h * f))), interpolation=cv2.INTER_AREA)
        small = small.reshape(small.shape[0], small.shape[1], -1)
        if levels is not None:
            levels[f] = small
    scale = np.array([small.shape[1] / src_img.shape[1], small.shape[0] / src_img.shape[0]], np.float32)
    return small, (src * scale).astype(np.float32)


def _area(pts: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """Signed area of each triangle (T,), in image coordinates (y down)."""
    a, b, c = pts[tris[:, 0]], pts[tris[:, 1]], pts[tris[:, 2]]
    return 0.5 * ((b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (c[:, 0] - a[:, 0]) * (b[:, 1] - a[:, 1]))


def _facing(pts: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """Signed area with the sign that most of the mesh's area has made positive: > 0 faces the
    camera. (The winding differs with the image's handedness; the bulk of a face always faces it.)"""
    a = _area(pts, tris)
    return a if a.sum() >= 0 else -a


def source_triangles(src: np.ndarray, dst: np.ndarray, tris: np.ndarray, mirror: np.ndarray,
                     hidden: np.ndarray | None = None, adjacency: tuple | None = None):
    """(T, 3) source vertex ids each target triangle takes its texture from, and which of them are
    mirrored: the triangle itself, or its mirror partner where the source's own triangle faces away
    or is hidden behind the nose or a cheek in the source photo (``hidden``,
    from ``visible_share``), and the partner is not. ``adjacency``: (``neighbours``,
    ``_partner_triangle``) of ``tris``, when the caller keeps them (they cost ~25 ms to build)."""
    nbrs, partner_tri = adjacency or (neighbours(tris), _partner_triangle(tris, mirror))
    own = _facing(src, tris)
    partner = mirror[tris]
    # the partner's vertices listed in the mirrored order run the other way round
    theirs = -_area(src, partner) * np.sign(_area(src, tris).sum() or 1.0)
    useful = theirs > 0
    unseen = np.zeros(len(tris), bool) if hidden is None else np.asarray(hidden, bool)
    useful &= ~unseen[partner_tri]
    flip = useful & ((own <= 0) | unseen | (_facing(dst, tris) <= 0))
    # a mirrored triangle alone among its own (the side of the nose of a slightly turned source)
    # brings the other side's light into a speck: mirror regions only, at least two of its three
    # neighbours mirrored too
    flip &= flip[nbrs].sum(axis=1) >= 2
    return np.where(flip[:, None], partner, tris), flip


def neighbours(tris: np.ndarray) -> np.ndarray:
    """(T, 3) the triangle across each edge (the triangle itself on the mesh's border)."""
    edges: dict[tuple[int, int], list[int]] = {}
    for k, (a, b, c) in enumerate(tris.tolist()):
        for e in ((a, b), (b, c), (c, a)):
            edges.setdefault((min(e), max(e)), []).append(k)
    out = np.repeat(np.arange(len(tris))[:, None], 3, axis=1)
    for k, (a, b, c) in enumerate(tris.tolist()):
        for j, e in enumerate(((a, b), (b, c), (c, a))):
            out[k, j] = next((t for t in edges[(min(e), max(e))] if t != k), k)
    return out


def _partner_triangle(tris: np.ndarray, mirror: np.ndarray) -> np.ndarray:
    """(T,) index of each triangle's mirror triangle (itself where the mirrored one is not in the
    list: six quads are split along the other diagonal)."""
    key = {tuple(sorted(t)): k for k, t in enumerate(tris.tolist())}
    return np.array([key.get(tuple(sorted(t)), k) for k, t in enumerate(mirror[tris].tolist())], np.int64)


def rasterise(pts: np.ndarray, tris: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """(h, w) int32 map of the triangle covering each pixel (-1: none). Triangles facing away are
    drawn first; with a depth column (``MeshAnalyzer.track(depth=True)``) the rest are drawn far
    to near, so the nose covers the far cheek of a turned head instead of the list's order
    deciding which shows."""
    label = np.full(shape, -1, np.int32)
    facing = _facing(pts, tris)
    front = np.nonzero(facing > 0)[0]
    if pts.shape[1] > 2:
        front = front[np.argsort(-pts[tris[front], 2].mean(axis=1), kind="stable")]
    order = np.concatenate([np.nonzero(facing < 0)[0], front])
    xy = np.rint(pts[:, :2]).astype(np.int32)
    # the one per-triangle loop: cv2 has no batched fill that keeps each polygon's own value
    for k in order:
        cv2.fillConvexPoly(label, xy[tris[k]], int(k))
    return label


def visible_share(pts: np.ndarray, tris: np.ndarray, label: np.ndarray) -> np.ndarray:
    """(T,) share of each triangle's area that shows in ``label`` (its rasterisation); 1 for a
    triangle under 4 px (too small to count)."""
    counts = np.bincount(label[label >= 0].ravel(), minlength=len(tris)).astype(np.float64)
    area = np.abs(_area(pts, tris))
    return np.where(area < 4.0, 1.0, np.minimum(counts / np.maximum(area, 1e-6), 1.0))


def affines(dst: np.ndarray, src: np.ndarray, dst_tris: np.ndarray, src_tris: np.ndarray) -> np.ndarray:
    """(T, 3, 2) per triangle: [x, y, 1] @ A maps a target pixel to its source position. Solved for
    all triangles at once; a collapsed target triangle (it covers no pixel) gets zeros."""
    d = np.concatenate([dst[dst_tris], np.ones(dst_tris.shape + (1,))], axis=2).astype(np.float64)
    s = src[src_tris].astype(np.float64)
    ok = np.abs(np.linalg.det(d)) > 1e-6
    d[~ok] = np.eye(3)
    out = np.linalg.solve(d, s)
    out[~ok] = 0.0
    return out.astype(np.float32)


def warp(src_img: np.ndarray, label: np.ndarray, aff: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(float32 patch with the source image's channels, uint8 map of pixels with a real source
    pixel): every labelled pixel sampled from the source in one remap."""
    h, w = label.shape
    ys, xs = np.nonzero(label >= 0)
    a = aff[label[ys, xs]]
    map_x = np.full((h, w), -1.0, np.float32)
    map_y = np.full((h, w), -1.0, np.float32)
    map_x[ys, xs] = xs * a[:, 0, 0] + ys * a[:, 1, 0] + a[:, 2, 0]
    map_y[ys, xs] = xs * a[:, 0, 1] + ys * a[:, 1, 1] + a[:, 2, 1]
    out = cv2.remap(src_img, map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    sh, sw = src_img.shape[:2]
    valid = (label >= 0) & (map_x >= 0) & (map_y >= 0) & (map_x <= sw - 1) & (map_y <= sh - 1)
    return out.astype(np.float32), valid.astype(np.uint8)


def kept_target(dst: np.ndarray, shape: tuple[int, int], size: float, eye: float, mouth: float) -> np.ndarray:
    """uint8 map of what stays the target's: each eye's opening grown by ``eye`` and the mouth's
    inside grown by ``mouth`` (fractions of the face size)."""
    out = np.zeros(shape, np.uint8)
    for idx, grow in ((fm.RIGHT_EYE, eye), (fm.LEFT_EYE, eye), (LIPS_INNER, mouth)):
        part = np.zeros(shape, np.uint8)
        cv2.fillPoly(part, [np.rint(cv2.convexHull(dst[list(idx)].astype(np.float32))).astype(np.int32)], 1)
        r = int(round(grow * size))
        if r > 0:
            part = cv2.dilate(part, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1)))
        out |= part
    return out


def skin_triangles(tris: np.ndarray) -> np.ndarray:
    """(T,) bool: triangles with no eye, lid, brow or lip vertex, whose colour is skin."""
    features = {v for table in fm.EYE_REFINED for v in table} | set(LIPS_INNER) | set(LIPS_OUTER)
    return ~np.isin(tris, sorted(features)).any(axis=1)


class MeshSwapper(FaceSwapper):
    name = "mesh_warp"
    # it runs the mesh itself at each face's box and five points: no 68 points (no dlib predictor)
    needs_landmarks = False
    matches_color = True
    # Declared, not calibrated like the classical swapper's (calibration/calibrate_classical.py has no
    # mesh arm yet): the mesh follows a turned head, and back-facing triangles are textured from
    # their mirror partner, but a frontal source gives a three-quarter target only its own half's
    # texture mirrored, and the mesh model itself loses faces near profile. Size: the mesh reads a
    # 192 px crop; below ~12 px between the eyes its eye and lip contours no longer land.
    competence = Competence(max_yaw=60.0, max_pitch=45.0, min_inter_ocular_px=12.0, needs_both_eyes=True,
                            basis="declared (tests/unit/backends/test_mesh_swap.py runs a three-quarter face; "
                                  "not calibrated)")

    def __init__(self, mask_erosion: float = 0.0, mask_feather: float = 0.04, color_transfer: bool = True,
                 relight: float = 0.06, eye_margin: float = 0.025, mouth_margin: float = 0.01, blend: str = "membrane",
                 analyzer=None, model_dir=None):
        """Sizes are fractions of the face size (the target mesh box's larger side).

        mask_erosion / mask_feather: where the soft edge starts inside the pasted area, its width.
        relight: scale (of face size) above which shading comes from the target, read on plain
            skin only (``mesh_blend.skin_shading``), never finer than SHADING_MIN_PX; 0 disables.
        eye_margin / mouth_margin: how far around the eye openings and the mouth's inside the
            target's own pixels stay (lashes, lid edge, lip line). A mouth margin of 0.05 (path
            mesh10, round mixed-14) took the source's stubble off the lip corners of smooth
            targets (one clip 0.19 -> 0.54 acceptable) but left 37 of 564 development faces too
            little changed to count as swapped, on clips already accepted: not the default.
        blend: "membrane" (the edge's colour from the target, ``mesh_blend.membrane``) or
            "feather" (the soft mask only).
        analyzer: a ``MeshAnalyzer`` to run the mesh with (one is made from ``model_dir``)."""
        self.mask_erosion, self.mask_feather = float(mask_erosion), float(mask_feather)
        self.color_transfer, self.relight = bool(color_transfer), float(relight)
        self.eye_margin, self.mouth_margin = float(eye_margin), float(mouth_margin)
        if blend not in BLENDS:
            raise ValueError(f"mesh swap blend {blend!r}: choose one of {', '.join(BLENDS)}")
        self.blend = blend
        if analyzer is None:
            from .mesh_analyzer import MeshAnalyzer

            analyzer = MeshAnalyzer(model_dir=model_dir)
        self.analyzer = analyzer
        self.tris = analyzer.triangles()
        self.mirror = mirror_map()
        self.skin = skin_triangles(self.tris)
        self.pasted = ~np.isin(self.tris, UPPER_OVAL).any(axis=1)
        self.nose_under = np.isin(self.tris, NOSE_UNDER).all(axis=1)
        # the source triangles judged by colour (``source_skin``): plain skin, nose underside aside
        self.judged = self.skin & ~np.isin(self.tris, NOSE_UNDER).any(axis=1)
        self.adjacency = (neighbours(self.tris), _partner_triangle(self.tris, self.mirror))
        self._sources: dict[str, np.ndarray] = {}

    @property
    def settings(self) -> tuple:
        return (round(self.mask_erosion, 4), round(self.mask_feather, 4), self.color_transfer,
                round(self.relight, 4), round(self.eye_margin, 4), round(self.mouth_margin, 4), HIDDEN_SHARE,
                self.blend, DETAIL_GAIN, DETAIL_SCALE, SHADING_MIN_PX, BUSY_TIMES, PREFILTER_RATIO)

    def model_files(self) -> list[tuple[str, str]]:
        # the analyzer's detector is listed too: harmless for licences (all Apache-2.0), and the
        # swap itself never runs the dlib recognizer the analyzer lists
        return [f for f in self.analyzer.model_files() if f[0] != "dlib_recognition"]

    def source_mesh(self, source: SourceIdentity) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(its 468-point mesh (x, y), the source as float32 RGB + skin weight (``source_skin``) x
        255, which triangles the photo does not show (``HIDDEN_SHARE``)), cached per source image
        and face."""
        if source.image is None or source.face is None:
            raise ValueError("the mesh swap needs the source image and its face (SourceIdentity.image / "
                             ".face); rebuild the face model with Build Face Model")
        img = as_rgb_uint8(source.image)
        key = hashlib.blake2b(img.tobytes() + np.asarray(source.face.bbox, np.float32).tobytes(),
                              digest_size=16).hexdigest()
        if key not in self._sources:
            (mesh, presence), = self.analyzer.track([img], [[source.face]], depth=True)[0]
            if presence < PRESENCE:
                raise ValueError(f"the face mesh finds no face in the source photo (presence {presence:.2f} "
                                 f"below {PRESENCE}); use a clearer, more frontal source photo")
            if len(self._sources) >= 8:       # a session rarely swaps more sources than this
                self._sources.pop(next(iter(self._sources)))
            # the source's skin map rides along as a fourth channel, warped with the texture
            label = rasterise(mesh, self.tris, img.shape[:2])
            # only sizeable skin triangles: around the eyes the iris model's points fold small
            # triangles over each other, which would read as hidden and mirror into a patchwork
            area = np.abs(_area(mesh, self.tris))
            hidden = (visible_share(mesh, self.tris, label) < HIDDEN_SHARE) & self.judged \
                & (area >= 0.5 * np.median(area))
            weight = source_skin(img, label, self.judged)
            self._sources[key] = (mesh[:, :2], np.dstack([img.astype(np.float32), weight * 255.0]), hidden)
        return self._sources[key]

    def swap(self, images: Sequence[np.ndarray], faces: Sequence[Sequence[Face]],
             source: SourceIdentity) -> list[list[SwapPatch]]:
        src, src_img, hidden = self.source_mesh(source)
        levels: dict[float, np.ndarray] = {}         # the source shrunk per size step, shared by the frames
        # every face's mesh in a few batched invokes, before the per-frame work on threads
        tracked = self.analyzer.track(images, faces, depth=True) if any(faces) else [[] for _ in faces]

        def one_frame(item) -> list[SwapPatch]:
            image, rows = item
            frame = as_rgb_uint8(image) if rows else None
            out = []
            for mesh, presence in rows:
                if presence < PRESENCE:
                    out.append(SwapPatch.refusal(f"face mesh presence {presence:.2f} below {PRESENCE}"))
                else:
                    out.append(self.swap_face(frame, mesh, src_img, src, hidden, levels))
            return out

        return map_frames(one_frame, zip(images, tracked))

    def swap_face(self, frame: np.ndarray, dst: np.ndarray, src_img: np.ndarray, src: np.ndarray,
                  hidden: np.ndarray | None = None, levels: dict | None = None) -> SwapPatch:
        """One face: ``dst`` its mesh in ``frame`` (x, y and optionally depth), ``src`` the source's
        in ``src_img``, ``hidden`` the source triangles its photo does not show, ``levels`` the
        source's shrunk copies made so far (``prefiltered``)."""
        h, w = frame.shape[:2]
        lo, hi = dst[:, :2].min(axis=0), dst[:, :2].max(axis=0)
        size = float(max(hi - lo))
        pad = max(4.0, 0.02 * size)
        x0, y0 = int(max(0, np.floor(lo[0] - pad))), int(max(0, np.floor(lo[1] - pad)))
        x1, y1 = int(min(w, np.ceil(hi[0] + pad))), int(min(h, np.ceil(hi[1] + pad)))
        if x1 - x0 < 2 or y1 - y0 < 2:
            return SwapPatch.refusal(OUTSIDE_FRAME)
        patch_f = frame[y0:y1, x0:x1].astype(np.float32)
        d = np.array(dst, np.float32)
        d[:, :2] -= np.array([x0, y0], np.float32)
        src_tris, flipped = source_triangles(src, d, self.tris, self.mirror, hidden, self.adjacency)
        label = rasterise(d, self.tris, patch_f.shape[:2])
        d = d[:, :2]
        src_img, src = prefiltered(src_img, src, size, levels)
        warped, valid = warp(src_img, label, affines(d, src, self.tris, src_tris))
        warped, skin_w = warped[..., :3], warped[..., 3] / 255.0
        warped = mirror_seam(warped, valid, flipped[np.maximum(label, 0)] & (label >= 0), size)
        keep = kept_target(d, label.shape, size, self.eye_margin, self.mouth_margin)
        keep |= self.nose_under[np.maximum(label, 0)] & (label >= 0)
        facing = _facing(d, self.tris)
        # a triangle facing away is hidden on the real head: where it still shows, the mesh has
        # overshot the silhouette (profile views), so the target's own pixels stay there
        shown = (self.pasted & (facing > 0))[np.maximum(label, 0)]
        paste = valid & (1 - keep) & shown.astype(np.uint8)
        not_skin = (skin_w < 0.5) & (paste > 0)
        paste &= ~not_skin
        mask = self._feather(paste, size)
        plain = (paste > 0) & (label >= 0) & self.skin[np.maximum(label, 0)]      # pasted plain skin
        # measured away from the paste's edge: the step to the target there is not texture
        warped, soften = match_sharpness(warped, patch_f, cv2.erode(paste, np.ones((5, 5), np.uint8)) > 0)
        if self.color_transfer:
            warped = reinhard_lab(warped, patch_f, paste, (plain, plain), stats_pixels=STATS_PIXELS)
        if self.relight > 0 and plain.sum() >= 64:
            # both sides' plain skin as it is: the target's shadows are what to take (leaving out
            # its darker or more saturated pixels left a shadowed chin pale and a pale ring at a
            # dark jaw, seen by eye on the labelled clips), the source's darker skin (a beard's
            # shadow) is shading to replace, not a feature to keep
            plain_f = plain.astype(np.float32)
            warped = skin_shading(warped, patch_f, plain_f, plain_f, max(SHADING_MIN_PX, self.relight * size))
        if self.blend == "membrane":
            warped = membrane(warped, patch_f, paste, size)
        warped = match_detail(warped, patch_f, plain, size)
        pixels = np.where(paste[..., None] > 0, warped, patch_f).astype(np.float32)
        # source_mouth False: the inside of the mouth is already the target's (the mask stack's
        # mouth part stays off in its "auto" setting, as for neural swappers)
        info = {"swapper": self.name, "source_mouth": False, "color_transfer": self.color_transfer,
                "triangles": int(len(self.tris)), "mirrored_triangles": int(flipped.sum()),
                "back_facing_target": int((facing < 0).sum()), "face_size_px": round(size, 1),
                "feather_px": round(max(1.0, self.mask_feather * size), 2), "mask_area_px": int((mask > 0).sum()),
                "source_not_skin_px": int(not_skin.sum()), "softened_px": soften}
        return SwapPatch((x0, y0, x1, y1), pixels, mask, info)

    def _feather(self, paste: np.ndarray, size: float) -> np.ndarray:
        """Soft mask falling to exact zeros at the pasted area's edge (the hull, the kept eyes
        and mouth): its core sits 2.5 sigma inside, so the blur is ~0.6 % at the cut."""
        sigma = max(1.0, self.mask_feather * size) / 5.0
        dist = cv2.distanceTransform(paste, cv2.DIST_L2, 5)
        core = (dist > self.mask_erosion * size + 2.5 * sigma).astype(np.float32)
        if not core.any():
            core = (dist > dist.max() / 2).astype(np.float32)
        mask = cv2.GaussianBlur(core, (0, 0), sigma) * paste
        mask[mask < 1e-4] = 0.0
        return np.minimum(mask, 1.0).astype(np.float32)
