"""Which functions count as which stage. The same labels wrap both the naive baseline and our
pipeline, so the two stage tables are directly comparable.

Model inference = detect + embed + landmarks + swap_model (the swapper's ONNX session). The
classical swapper has no model: its whole ``swap`` is geometry and blending, i.e. not inference.
"""
from __future__ import annotations

INFERENCE = ("detect", "embed", "landmarks", "swap_model")

# (row in the stage table, labels summed into it); None: the stage is not part of this setup.
ROWS = (
    ("decode", ("decode",)),
    ("detect", ("detect",)),
    ("embed", ("embed",)),
    ("align/landmarks", ("align", "landmarks")),
    ("swap", ("swap", "swap_model")),
    ("paste", ("paste",)),
    ("restore", None),      # no restorer in these workflows
    ("QA", None),           # not part of the video pipeline yet
    ("encode", ("encode",)),
)
OTHER_LABELS = ("flow", "store", "replay", "select")


def targets(case, naive_module=None) -> list[tuple]:
    from swapline_core.backends import insightface_pack as insightface_backend
    from swapline_core.backends import inswapper
    from swapline_core.faces import tracking
    from swapline_core.video import frames
    from swapline_core.video import read as video_read
    from swapline_core.video import stages as pipeline
    from swapline_core.video import store as chunk_store
    from swapline_core.video.write import VideoWriter

    out = [
        (video_read, "iter_frames", "decode", "gen"),   # iter_chunks and FrameSequence go through it
        (case.analyzer, "detect", "detect"),
        (case.analyzer, "embed", "embed"),
        (case.analyzer, "landmarks68", "landmarks"),
        (case.swapper, "swap", "swap"),
        (insightface_backend, "warp_crops", "align"),   # recognizer crops
        (inswapper, "warp_crops", "align"),             # swapper crops
        (inswapper, "crop_to_patch", "paste"),          # swapped crop back to a frame patch
        (pipeline, "apply_patches", "paste"),
        (pipeline, "encode_layer_chunk", "store"),
        (chunk_store.ChunkStore, "save", "store"),
        (chunk_store.ChunkStore, "load", "store"),
        (frames, "apply_layer_chunk", "replay"),
        (tracking.FaceTracker, "_flow", "flow"),
        (VideoWriter, "write", "encode"),
        (VideoWriter, "close", "encode"),
    ]
    session = getattr(case.swapper, "session", None)
    if session is not None:
        out.append((session, "run", "swap_model"))
    if naive_module is not None:
        out += [(naive_module, "paste_full_frame", "paste"), (naive_module, "choose", "select")]
    return out
