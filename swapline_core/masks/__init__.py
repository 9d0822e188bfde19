"""The mask stack: which pixels of a swapped face may replace the target's.

Scaffold: occlusion, region, landmark-area and mouth masks land here (issue 13, items 1-2)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MaskOptions:
    enabled: bool = True

    def to_json(self) -> dict:
        return {"enabled": self.enabled}


def refine_masks(frames, faces, patches, opts: MaskOptions, context=None):
    """Cut each patch's mask by the stack computed on the target; returns the patches."""
    return patches
