"""Mask stack options and how the parts combine.

Every part is a "may swap" map in 0..1 over a patch (1: the swapped face may replace the
target here, 0: keep the target). Parts combine by minimum, like FaceFusion's box/occlusion/
area/region masks, so any one part can keep a pixel of the target and none can add one.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from ..backends.cache import file_sha256
from ..errors import SwaplineError
from . import rules

OCCLUSION_MODES = ("off", "builtin", "model", "builtin+model")
MOUTH_MODES = ("auto", "on", "off")
# BiSeNet (CelebAMask-HQ, 19 classes) label indices of the regions a swap may replace.
REGIONS = {"skin": 1, "left-eyebrow": 2, "right-eyebrow": 3, "left-eye": 4, "right-eye": 5,
           "glasses": 6, "nose": 10, "mouth": 11, "upper-lip": 12, "lower-lip": 13}
DEFAULT_REGIONS = ("skin", "left-eyebrow", "right-eyebrow", "left-eye", "right-eye", "nose",
                   "upper-lip", "lower-lip")
# 68-point (iBUG) indices whose hull forms each landmark area.
AREAS = {"upper-face": (0, 1, 2, 31, 32, 33, 34, 35, 14, 15, 16, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17),
         "lower-face": (3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 35, 34, 33, 32, 31),
         "mouth": tuple(range(48, 68))}
PART_NAMES = ("occlusion", "region", "area", "mouth")


@dataclass(frozen=True)
class MaskOptions:
    """What cuts each swapped face's paste mask. Defaults: the built-in occluder on, the mouth
    interior kept where the swapper warps the source's mouth (``auto``), no model files."""
    enabled: bool = True
    occlusion: str = "builtin"            # off | builtin | model | builtin+model
    occluder_path: str | None = None      # XSeg ONNX (256 px, NHWC) for "model"
    occlusion_sensitivity: float = 1.0    # >1 flags more as occluder, <1 less
    region_path: str | None = None        # BiSeNet face parser ONNX (512 px); None: off
    regions: tuple[str, ...] = DEFAULT_REGIONS
    areas: tuple[str, ...] = ()           # landmark areas the swap is limited to; (): whole face
    mouth: str = "auto"                   # auto: on for swappers that warp the source's mouth
    mouth_size: float = 0.08              # grows the inner-mouth polygon, fraction of mouth width
    mouth_feather: float = 0.12           # soft edge, fraction of mouth width
    mouth_lower_lip: float = 0.0          # 0..1: also keep this much of the target's lower lip
    erode: float = 0.0                    # grows every cut by this fraction of the face size
    blur: float = 0.02                    # feather of the cuts, fraction of the face size
    temporal: int = 2                     # median over +-N frames of a track (0: off)
    rules_off: tuple[str, ...] = ()       # built-in occluder rules switched off (rules.NAMES)

    def __post_init__(self):
        if self.occlusion not in OCCLUSION_MODES:
            raise SwaplineError(f"mask occlusion must be one of {OCCLUSION_MODES}, got {self.occlusion!r}")
        if self.mouth not in MOUTH_MODES:
            raise SwaplineError(f"mask mouth must be one of {MOUTH_MODES}, got {self.mouth!r}")
        if "model" in self.occlusion and not self.occluder_path:
            raise SwaplineError("mask occlusion uses a model but no occluder file (XSeg ONNX in "
                                "models/facemask) was chosen")
        bad = [r for r in self.regions if r not in REGIONS]
        if bad:
            raise SwaplineError(f"unknown face region(s) {bad}; choose from {', '.join(REGIONS)}")
        if self.region_path and not self.regions:
            raise SwaplineError("a face parser was chosen but no region is selected")
        object.__setattr__(self, "rules_off", rules.parse_off(self.rules_off))
        bad = [a for a in self.areas if a not in AREAS]
        if bad:
            raise SwaplineError(f"unknown landmark area(s) {bad}; choose from {', '.join(AREAS)}")

    @property
    def builtin_occlusion(self) -> bool:
        return self.enabled and self.occlusion in ("builtin", "builtin+model")

    @property
    def model_occlusion(self) -> bool:
        return self.enabled and self.occlusion in ("model", "builtin+model")

    def model_files(self) -> list[tuple[str, str]]:
        """(role, path) of the mask model files that cut the paste mask (provenance names them)."""
        files = []
        if self.model_occlusion and self.occluder_path:
            files.append(("occluder (XSeg)", self.occluder_path))
        if self.enabled and self.region_path:
            files.append(("face parser (BiSeNet)", self.region_path))
        return files

    def describe(self) -> str:
        """The mask method in words, for the manifest."""
        if not self.enabled:
            return "swapper's own paste mask only"
        parts = []
        if self.builtin_occlusion:
            parts.append("built-in skin-colour occluder" + (f" without {', '.join(self.rules_off)}"
                                                            if self.rules_off else ""))
        if self.model_occlusion:
            parts.append("XSeg occluder model")
        if self.region_path:
            parts.append(f"BiSeNet face regions ({', '.join(self.regions)})")
        if self.areas:
            parts.append(f"landmark areas ({', '.join(self.areas)})")
        parts.append(f"mouth {self.mouth}")
        return ", ".join(parts)

    def to_json(self) -> dict:
        """Everything that changes the result, for cache keys; model files by name and sha256."""
        out = {k: getattr(self, k) for k in ("enabled", "occlusion", "occlusion_sensitivity", "mouth",
                                             "mouth_size", "mouth_feather", "mouth_lower_lip", "erode",
                                             "blur", "temporal")}
        out["occluder"] = _file_stamp(self.occluder_path) if self.model_occlusion else None
        out["parser"] = _file_stamp(self.region_path)
        out["regions"] = list(self.regions) if self.region_path else []
        out["areas"] = list(self.areas)
        if self.rules_off:      # absent when all are on: the keys of jobs made before the switch still match
            out["rules_off"] = list(self.rules_off)
        return out


def parse_list(text: str, allowed, what: str) -> tuple[str, ...]:
    """A comma list from a node widget -> validated names (``all`` selects every one)."""
    items = [t.strip().lower() for t in (text or "").replace(";", ",").split(",") if t.strip()]
    if items == ["all"]:
        return tuple(allowed)
    bad = [t for t in items if t not in allowed]
    if bad:
        raise SwaplineError(f"unknown {what} {bad}; choose from: {', '.join(allowed)} (comma separated)")
    return tuple(dict.fromkeys(items))


def combine(parts: dict[str, np.ndarray], base: np.ndarray) -> np.ndarray:
    """The final paste mask: the swapper's own mask cut by the minimum of every part."""
    out = base.astype(np.float32)
    for p in parts.values():
        np.minimum(out, p, out=out)       # in place: a patch-sized temporary per part costs page faults
    out[out < 1.5 / 255.0] = 0.0      # like crop_to_patch: "outside" and "untouched" must agree
    return out


def _file_stamp(path: str | None):
    """[file name, sha256 of its bytes]: a mask model replaced by another of the same name (and even
    the same size) changes the key, so a resumed job never reuses chunks its old weights cut. The
    hash is the one swappers are keyed by (cached per path, size and mtime: hashed once)."""
    if not path:
        return None
    try:
        return [os.path.basename(path), file_sha256(path)]
    except OSError:
        return [os.path.basename(path), None]


@dataclass
class FaceMasks:
    """The parts computed for one face in its patch (each "may swap", 0..1) and a summary."""
    parts: dict[str, np.ndarray] = field(default_factory=dict)
    info: dict = field(default_factory=dict)
