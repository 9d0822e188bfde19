"""Model-based parts (XSeg occlusion, BiSeNet regions) and the landmark-area part.

The models see the target face in the aligned crop FaceFusion uses for 128-px swappers (ArcFace
template, here at 256 px); their maps are warped back into each patch. Outside the crop a model
knows nothing, so it cuts nothing there (value 1).
"""
from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from ..faces.align import invert, warp_crops
from ..types import Face, SwapPatch
from .onnx_models import PARSER_SIZE, XSEG_SIZE, load_occluder, load_parser
from .stack import AREAS, REGIONS, MaskOptions


def to_patch(crop_map: np.ndarray, m: np.ndarray, region, size: int) -> np.ndarray:
    """A (size, size) map of the aligned crop (frame->crop transform ``m``) in patch space."""
    x0, y0, x1, y1 = region
    im = invert(m * (crop_map.shape[0] / size))
    im[:, 2] -= (x0, y0)
    return cv2.warpAffine(crop_map.astype(np.float32), im, (x1 - x0, y1 - y0), flags=cv2.INTER_LINEAR,
                          borderMode=cv2.BORDER_CONSTANT, borderValue=1.0)


def _inward(hard: np.ndarray, sigma: float) -> np.ndarray:
    """Soften a 0/1 map so it falls to 0 at the edge of the 1-area (never leaks past it)."""
    soft = cv2.GaussianBlur(hard.astype(np.float32), (0, 0), sigma)
    return ((np.clip(soft, 0.5, 1.0) - 0.5) * 2.0).astype(np.float32)


def model_parts(frames: Sequence[np.ndarray], pairs: Sequence[tuple[int, Face, SwapPatch]],
                opts: MaskOptions, provider: str = "auto") -> tuple[list[dict], dict]:
    """Per (frame index, face, patch): {"occlusion_model": map, "region": map} in patch space."""
    out: list[dict] = [{} for _ in pairs]
    info: dict = {}
    if not pairs or not (opts.model_occlusion or opts.region_path):
        return out, info
    crops, mats = [], []
    for i, face, _ in pairs:
        c, m = warp_crops(frames[i], [face], XSEG_SIZE, "arcface")
        crops.append(c[0])
        mats.append(m[0])
    crops = np.stack(crops)
    if opts.model_occlusion:
        occ = load_occluder(opts.occluder_path, provider)
        info["occluder"] = {"file": occ.name, "providers": occ.providers}
        for k, y in enumerate(occ(crops)):
            y = _inward(y, 5.0)           # FaceFusion's post-processing: edges fall to 0
            out[k]["occlusion_model"] = to_patch(y, mats[k], pairs[k][2].region, XSEG_SIZE)
    if opts.region_path:
        parser = load_parser(opts.region_path, provider)
        info["parser"] = {"file": parser.name, "providers": parser.providers}
        big = np.stack([cv2.resize(c, (PARSER_SIZE, PARSER_SIZE), interpolation=cv2.INTER_LINEAR) for c in crops])
        labels = parser(big)
        wanted = [REGIONS[r] for r in opts.regions]
        for k, lab in enumerate(labels):
            sel = np.isin(lab, wanted).astype(np.float32)
            y = _inward(cv2.resize(sel, (XSEG_SIZE, XSEG_SIZE), interpolation=cv2.INTER_AREA), 5.0)
            out[k]["region"] = to_patch(y, mats[k], pairs[k][2].region, XSEG_SIZE)
    return out, info


def area_part(shape, lm68: np.ndarray | None, areas: Sequence[str], face_size: float) -> np.ndarray | None:
    """The swap limited to the hull(s) of the chosen landmark areas; None without landmarks."""
    if not areas or lm68 is None:
        return None
    hard = np.zeros(shape, np.uint8)
    for a in areas:
        cv2.fillConvexPoly(hard, cv2.convexHull(np.rint(lm68[list(AREAS[a])]).astype(np.int32)), 1)
    return _inward(hard, max(face_size * 0.02, 1.0))
