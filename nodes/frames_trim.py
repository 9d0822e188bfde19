"""Trim Frames: drop the leading frames of a sequence (a farm chunk's pre-roll)."""
from __future__ import annotations

import json

from comfy_api.latest import io
from typing_extensions import override

from ..swapline_core.errors import SwaplineError
from ..swapline_core.video.trim import trim_leading
from . import model_paths
from .convert import check_interrupt, progress
from .types import CATEGORY, Frames


class TrimFrames(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineTrimFrames",
            display_name="Trim Frames (Swapline)",
            category=f"{CATEGORY}/video",
            description="Drops the first frames of a sequence, keeping every change made to the rest (stored "
                        "as one layer of changed pixels; the source audio and frame times start at the new first "
                        "frame). Used by swapline-farm to discard a chunk's pre-roll: frames processed only so "
                        "tracking and smoothing start warm.",
            inputs=[Frames.Input("frames", tooltip="The processed frame sequence."),
                    io.Int.Input("drop", default=0, min=0, max=10_000_000,
                                 tooltip="Leading frames to drop (0 = pass the sequence through).")],
            outputs=[Frames.Output(display_name="frames")],
        )

    @classmethod
    @override
    def execute(cls, frames, drop) -> io.NodeOutput:
        if drop >= frames.count:
            raise SwaplineError(f"Trim Frames: dropping {drop} frames would leave nothing of the "
                                f"{frames.count}-frame sequence; lower 'drop'")
        pbar = progress(frames.count - drop)
        from ..swapline_core.video.stages import Hooks

        out = trim_leading(frames, drop, model_paths.swapline_cache_dir(),
                           Hooks(progress=pbar.update, check_interrupt=check_interrupt))
        return io.NodeOutput(out, ui={"text": [json.dumps({"dropped": drop, "frames": out.count})]})
