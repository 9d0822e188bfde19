"""INSwapper-style ONNX swappers (inswapper_128, reswapper_128/256 and anything with their signature).

Kept as its own name for callers that want exactly this family; the work is done by the shared
family runner (backends/swappers), which checks the signature up front so a wrong file fails with
its name instead of a shape error deep inside onnxruntime.
"""
from __future__ import annotations

from ..errors import BadModelError
from .swappers.runner import FamilySwapper

SIZE = 128


class InSwapper(FamilySwapper):
    def __init__(self, path: str, provider: str = "auto", mask_kind: str = "ellipse",
                 mask_erode: float = 0.0, mask_blur: float = 0.1, **kwargs):
        super().__init__(path, provider, mask_kind, mask_erode, mask_blur, **kwargs)
        if self.spec.source != "emap":
            raise BadModelError(path, f"it is a {self.spec.name} swapper, not an INSwapper-style one "
                                      "(expected inputs target[N,3,128,128] and source[N,512] and an emap)")
