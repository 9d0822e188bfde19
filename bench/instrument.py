"""Which functions count as which stage of our pipeline in the speed section (bench/speed.py).

Model inference = detect + embed + landmarks + swap_model (the swapper's ONNX session). The
classical swapper has no model: its whole ``swap`` is geometry and blending, i.e. not inference.
"""
from __future__ import annotations

from typing import NamedTuple

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
# Itemised under "other": work between decode, the models and encode (the mask stack and the
# guards run inside Swap Faces in Frames).
OTHER_LABELS = ("flow", "store", "replay", "masks", "guards")


class Target(NamedTuple):
    """One function to time: ``getattr(owner, attr)`` is replaced for the run.

    ``owner`` must be where the caller looks the name up at call time (the module that imports
    it, or the object), not where it is defined: ``from x import f`` binds a second name, and
    patching ``x.f`` would leave that caller untimed. ``required``: the run must call it at
    least once, or the probe's stage table would silently lose that time (``check_called``)."""
    owner: object
    attr: str
    label: str
    gen: bool = False
    required: bool = True

    @property
    def name(self) -> str:
        owner = self.owner
        base = getattr(owner, "__qualname__", None) or getattr(owner, "__name__", None) or type(owner).__qualname__
        return f"{base}.{self.attr}"


class StaleTargetError(AttributeError):
    """A target names something the core no longer has (moved, renamed or no longer called)."""


def targets(case) -> list[Target]:
    """What to time in a run of ``case``; every owner/name is the one the running code looks up
    (checked against the tree: ``check_exists``, ``check_called``)."""
    from swapline_core.backends import insightface_pack
    from swapline_core.backends.swappers import runner
    from swapline_core.faces import tracking
    from swapline_core.swap import chunk as swap_chunk
    from swapline_core.video import frames
    from swapline_core.video import read as video_read
    from swapline_core.video import stages as pipeline
    from swapline_core.video import store as chunk_store
    from swapline_core.video.write import VideoWriter

    analyzer, swapper = case.analyzer, case.swapper
    neural = isinstance(swapper, runner.FamilySwapper)
    out = [
        Target(video_read, "iter_frames", "decode", gen=True),   # iter_chunks and FrameSequence go through it
        Target(analyzer, "detect", "detect"),
        Target(analyzer, "embed", "embed"),       # on detection frames (identity mode)
        # landmarks only where the swapper needs them (swap.chunk.prepare_landmarks)
        Target(analyzer, "landmarks68", "landmarks", required=swapper.needs_landmarks),
        Target(swapper, "swap", "swap"),
        Target(VideoWriter, "write", "encode"),
        Target(VideoWriter, "close", "encode"),
    ]
    if isinstance(analyzer, insightface_pack.InsightFaceAnalyzer):
        out.append(Target(insightface_pack, "warp_crops", "align"))      # recognizer crops
    if neural:
        # the INSwapper-style swappers run through the shared family runner since the core split
        out += [Target(runner, "warp_crops", "align"),                     # swapper crops
                Target(runner, "crop_to_patch", "paste"),                  # swapped crop back to a frame patch
                Target(swapper.session, "run", "swap_model")]
    return out + [
        Target(swap_chunk, "apply_patches", "paste"),       # Swap Faces in Frames' paste-back
        Target(swap_chunk, "refine_masks", "masks"),
        Target(swap_chunk, "screen", "guards"),
        Target(pipeline, "encode_layer_chunk", "store"),
        Target(chunk_store.ChunkStore, "save", "store"),
        Target(chunk_store.ChunkStore, "load", "store", required=False),   # only on resume / replay
        Target(frames, "apply_layer_chunk", "replay"),
        Target(tracking.FaceTracker, "_flow", "flow"),
    ]


def check_exists(items) -> None:
    """Fail before any timing when a target names something that is not there."""
    missing = [t for t in items if not hasattr(t.owner, t.attr)]
    if missing:
        raise StaleTargetError(
            "bench/instrument.py times functions the core no longer has: "
            + ", ".join(f"{t.name} ({t.label})" for t in missing)
            + ". They were moved or renamed: point targets() at the module that calls them now.")


def check_called(items, calls: dict[str, int], kind: str = "speed") -> None:
    """Fail when a required target was patched but never ran: a stale import left behind in a
    module (the caller moved elsewhere) would otherwise time nothing and hide its stage."""
    idle = [t for t in items if t.required and not calls.get(t.name)]
    if idle:
        raise StaleTargetError(
            f"bench/instrument.py: during the {kind} run nothing called "
            + ", ".join(f"{t.name} ({t.label})" for t in idle)
            + ". The code that used to call them goes through another module now: patch that one.")
