"""Known-good and known-bad swap outputs of a real clip, for QA calibration and tests.

Every case is built from the real sample clip's frames and the classical swap of it, each
with one specific defect (or none), so each QA metric can be checked against the defect it is
meant to see. Used by ``calibration/calibrate_qa.py`` (thresholds) and ``tests/unit/qa`` (each
known-bad case is caught by its own metric; known-good cases pass).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

import cv2
import numpy as np

from swapline_core.qa.metrics_image import (
    SKIN_DE,
    _crop_box,
    estimate_occluder,
    face_regions,
    lab,
)
from swapline_core.types import Face, SourceIdentity

# case name -> the metric that must catch it ("coverage": the job-level decision)
BAD_CASES = {
    "occluder_painted": "occluder_overwrite",
    "mouth_frozen_to_source": "expression",
    "pasted_off_face": "offface",
    "colour_cast": "colour_cast",
    "seam_ring": "seam_ratio",
    "colour_bleed": "bleed",
    "no_swap": "coverage",
}
GOOD_CASES = ("improved_swap", "improved_swap_feather")
# The pipeline's real output, reported with every calibration but expected neither to pass nor to
# fail: it was a known-bad case (the glasses frames painted over on 45 of 48 frames) until the
# built-in occluder's hue test kept red frames (issue 13); the same limits now fail 3 of 48 on that.
REFERENCE_CASES = ("classical_today",)
# Known-bad outputs frozen as files (made by old code, so not rebuilt from today's pipeline): case ->
# the metrics that must each catch it. Each is the first frames of the sample clip, one PNG per
# frame, under tests/fixtures/qa/<case>/ with a README saying how it was made.
# demo_at_issue: the built-in demo's output when issue 14 was filed (commit 1e0d70c): red glasses
# painted over, a cyan band on the forehead (colour bleed), the target's open mouth replaced by
# the source's closed one. Each defect must be seen by its own metric.
FROZEN_BAD_CASES = {"demo_at_issue": ("occluder_overwrite", "bleed", "expression")}


@dataclasses.dataclass
class Clip:
    originals: list[np.ndarray]
    classical: list[np.ndarray]
    faces: list[list[Face]]            # tracked faces, with 68 landmarks of the target
    source: SourceIdentity


# The known-good swap keeps more than the gate's estimate calls an occluder: every pixel within
# this delta E margin of it too. The gate re-fits the target's landmarks itself, so its skin
# reference (and so its borderline pixels) differ slightly from the ones used here; a good swap
# that keeps the glasses must not fail on that difference.
KEEP_SKIN_DE = 0.7 * SKIN_DE
# The target's lower face (under the nose, between the jaw corners, down to the chin): kept by
# the known-good swap so its mouth is the target's *and* sits in the target's jaw. Putting back
# only the lips made a source face with a pasted mouth, on which dlib fits the mouth a lip-height
# off (measured opening 0.03 where the pasted mouth is 0.10 jaw widths open): no swap a viewer
# would call good, and the expression limits chosen on it caught nothing.
LOWER_FACE = [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 35, 34, 33, 32, 31]


def _full_masks(frame: np.ndarray, lm: np.ndarray) -> dict[str, np.ndarray]:
    """Full-frame float masks of one face: hull, skin, occluder estimate, lips, lower face, size."""
    h, w = frame.shape[:2]
    x0, y0, x1, y1 = _crop_box(lm, (h, w))
    crop = frame[y0:y1, x0:x1]
    reg = face_regions(crop.shape[:2], lm - np.array([x0, y0], np.float32))
    occ = estimate_occluder(lab(crop), reg)
    keep_occ = estimate_occluder(lab(crop), reg, KEEP_SKIN_DE)
    lower = np.zeros(crop.shape[:2], np.uint8)
    cv2.fillConvexPoly(lower, cv2.convexHull(np.round(lm[LOWER_FACE] - [x0, y0]).astype(np.int32)), 1)
    lips = np.zeros(crop.shape[:2], np.uint8)
    g = max(1, round(0.06 * reg["size"]))
    cv2.fillConvexPoly(lips, cv2.convexHull(np.round(lm[48:60] - [x0, y0]).astype(np.int32)), 1)
    lips = cv2.dilate(lips, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * g + 1,) * 2)).astype(bool)
    out = {}
    for name, m in (("hull", reg["hull"]), ("skin", reg["hull"] & ~reg["features"] & ~occ),
                    ("occluder", occ), ("keep_occluder", keep_occ), ("lips", lips), ("lower_face", lower)):
        full = np.zeros((h, w), np.float32)
        full[y0:y1, x0:x1] = m
        out[name] = full
    out["size"] = reg["size"]
    return out


def _feather(mask: np.ndarray, px: float) -> np.ndarray:
    k = max(1, int(px)) * 2 + 1
    return cv2.GaussianBlur(mask.astype(np.float32), (k, k), 0)


def _blend(base: np.ndarray, top: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    a = np.clip(alpha, 0, 1)[..., None]
    return np.clip(base.astype(np.float32) * (1 - a) + top.astype(np.float32) * a + 0.5, 0, 255).astype(np.uint8)


def improved(o: np.ndarray, c: np.ndarray, faces: list[Face], feather: float = 0.02) -> np.ndarray:
    """The swap pipeline's real output with the target's occluders and lower face (mouth in its
    own jaw) put back: the known-good reference. Everything else (forehead, eyes, nose, cheeks:
    about 60 % of the face) is the pipeline's pixels."""
    out = c
    for f in faces:
        m = _full_masks(o, f.landmarks)
        g = max(3, round(0.02 * m["size"])) * 2 + 1
        keep = np.maximum(cv2.dilate(m["keep_occluder"], np.ones((g, g), np.uint8)), m["lower_face"])
        out = _blend(out, o, _feather(keep, feather * m["size"]))
    return out


def _per_frame(clip: Clip, fn: Callable) -> list[np.ndarray]:
    return [fn(k, o, c, fs) for k, (o, c, fs) in enumerate(zip(clip.originals, clip.classical, clip.faces))]


def build_cases(clip: Clip) -> dict[str, list[np.ndarray]]:
    """Every case as a list of frames (same length as the clip)."""
    good = _per_frame(clip, lambda k, o, c, fs: improved(o, c, fs))
    cases: dict[str, list[np.ndarray]] = {"improved_swap": good,
                                          "improved_swap_feather": _per_frame(
                                              clip, lambda k, o, c, fs: improved(o, c, fs, 0.06))}
    src, sf = clip.source.image, clip.source.face

    def occluder_painted(k, o, c, fs):
        out = good[k]
        for f in fs:
            m = _full_masks(o, f.landmarks)
            skin = np.median(out[m["skin"] > 0.5], axis=0)
            out = _blend(out, np.broadcast_to(skin, out.shape), _feather(m["occluder"], 1.5))
        return out

    def mouth_frozen(k, o, c, fs):
        # The source's mouth, placed by the mouth corners and nose tip: its opening stays the
        # source's whatever the target says (a swapper that ignores the target's expression).
        out = good[k]
        for f in fs:
            m = _full_masks(o, f.landmarks)
            idx = [48, 54, 33]
            a, _ = cv2.estimateAffinePartial2D(sf.landmarks[idx].astype(np.float32),
                                               f.landmarks[idx].astype(np.float32))
            warped = cv2.warpAffine(src, a, (o.shape[1], o.shape[0]), flags=cv2.INTER_LINEAR,
                                    borderMode=cv2.BORDER_REFLECT)
            src_lips = np.zeros(src.shape[:2], np.float32)
            cv2.fillConvexPoly(src_lips, cv2.convexHull(np.round(sf.landmarks[48:60]).astype(np.int32)), 1.0)
            mask = cv2.warpAffine(src_lips, a, (o.shape[1], o.shape[0]))
            mask = cv2.dilate(mask, np.ones((5, 5), np.uint8))
            mask = np.maximum(mask, m["lips"])
            out = _blend(out, warped, _feather(mask, 0.03 * m["size"]))
        return out

    def off_face(k, o, c, fs):
        # The swapped face patch pasted a third of a face to the side of the face.
        out = o.copy()
        for f in fs:
            m = _full_masks(o, f.landmarks)
            diff = np.abs(c.astype(np.int16) - o.astype(np.int16)).max(axis=-1) > 3
            dx = int(0.45 * m["size"])
            mat = np.float32([[1, 0, dx], [0, 1, 0]])
            moved = cv2.warpAffine(c, mat, (o.shape[1], o.shape[0]))
            mmask = cv2.warpAffine(_feather(diff, 2), mat, (o.shape[1], o.shape[0]))
            out = _blend(out, moved, mmask)
        return out

    def colour_cast(k, o, c, fs):
        out = good[k]
        for f in fs:
            m = _full_masks(o, f.landmarks)
            lab_img = lab(out)
            lab_img[..., 1] += 14.0      # towards magenta
            lab_img[..., 2] += 10.0      # and yellow: a badly matched source skin tone
            cast = cv2.cvtColor(lab_img, cv2.COLOR_LAB2RGB)
            cast = np.clip(cast * 255 + 0.5, 0, 255).astype(np.uint8)
            out = _blend(out, cast, _feather(m["hull"], 0.04 * m["size"]))
        return out

    def seam_ring(k, o, c, fs):
        out = good[k]
        for f in fs:
            m = _full_masks(o, f.landmarks)
            hull = (m["hull"] > 0.5).astype(np.uint8)
            w = max(2, round(0.025 * m["size"]))
            ring = cv2.dilate(hull, np.ones((w, w), np.uint8)) - cv2.erode(hull, np.ones((w, w), np.uint8))
            # A hard edge: the target's pixels brightened on a thin band (a paste without feather).
            out = out.copy()
            out[ring > 0] = np.clip(out[ring > 0].astype(np.int16) + 45, 0, 255).astype(np.uint8)
        return out

    def colour_bleed(k, o, c, fs):
        # Background/hair colour from outside the face smeared over the cheeks.
        out = good[k]
        for f in fs:
            m = _full_masks(o, f.landmarks)
            lm = f.landmarks
            blob = np.zeros(o.shape[:2], np.float32)
            for p in (lm[2] * 0.6 + lm[30] * 0.4, lm[14] * 0.6 + lm[30] * 0.4):
                cv2.circle(blob, (int(p[0]), int(p[1])), max(3, int(0.13 * m["size"])), 1.0, -1)
            x0, y0 = int(lm[:, 0].min()), int(lm[:, 1].min())
            foreign = np.broadcast_to(o[max(0, y0 - 10), max(0, x0 - 10)].astype(np.float32) * 0.3 +
                                      np.float32([20, 90, 160]) * 0.7, o.shape)
            out = _blend(out, foreign, _feather(blob, 2) * 0.9)
        return out

    cases["occluder_painted"] = _per_frame(clip, occluder_painted)
    cases["mouth_frozen_to_source"] = _per_frame(clip, mouth_frozen)
    cases["pasted_off_face"] = _per_frame(clip, off_face)
    cases["colour_cast"] = _per_frame(clip, colour_cast)
    cases["seam_ring"] = _per_frame(clip, seam_ring)
    cases["colour_bleed"] = _per_frame(clip, colour_bleed)
    cases["no_swap"] = [o.copy() for o in clip.originals]
    cases["classical_today"] = list(clip.classical)
    return cases


def frozen_dir(name: str):
    from bench.paths import REPO

    return REPO / "tests" / "fixtures" / "qa" / name


def load_frozen(name: str) -> list[np.ndarray]:
    """The frames of a frozen case (``FROZEN_BAD_CASES``): frame k of it is frame k of the clip."""
    from PIL import Image

    folder = frozen_dir(name)
    files = sorted(folder.glob("*.png"))
    if not files:
        raise FileNotFoundError(f"the frozen QA case '{name}' has no PNG frames in {folder}: restore the folder "
                                "from git (its README.md says how it was made)")
    return [np.array(Image.open(p).convert("RGB")) for p in files]


def load_clip(analyzer, store_root: str, count: int = 48, chunk: int = 16, swap: bool = True) -> Clip:
    """The shipped sample clip, tracked (largest face) and swapped with the classical swapper.
    ``swap=False``: tracked only (``classical`` is then empty), for judging frozen outputs."""
    from PIL import Image

    from bench.paths import REPO
    from swapline_core.backends.classical import ClassicalSwapper
    from swapline_core.faces import identity as face_model
    from swapline_core.swap.chunk import SwapOptions
    from swapline_core.video import stages
    from swapline_core.video.frames import FrameSequence

    img = np.array(Image.open(REPO / "assets" / "samples" / "source_face.png").convert("RGB"))
    face = max(analyzer.detect([img])[0], key=lambda f: f.area)
    analyzer.embed([img], [[face]])
    analyzer.landmarks68([img], [[face]])
    source = face_model.build([img], [face], analyzer.recognizer_name)
    seq = FrameSequence.open(str(REPO / "assets" / "samples" / "kling_avatar_clip.mp4"), count=count, chunk=chunk)
    faceset, _ = stages.track_faces(seq, analyzer, store_root, stages.Hooks(), mode="largest")
    originals = [f for _, fr in seq.iter_chunks() for f in fr]
    classical = []
    if swap:
        out, _ = stages.swap_frames(seq, faceset, source, ClassicalSwapper(), analyzer, store_root,
                                    stages.Hooks(), SwapOptions())
        classical = [f for _, fr in out.iter_chunks() for f in fr]
    faces = [[f.copy() for f in ff.faces] for ff in faceset.frames]
    analyzer.landmarks68(originals, faces)
    return Clip(originals, classical, faces, source)
