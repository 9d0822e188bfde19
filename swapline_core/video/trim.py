"""Drop leading frames of a sequence: what a farm chunk's pre-roll needs.

A chunk of a long clip is processed with a few frames before it (the pre-roll) so tracking and
smoothing start warm; those frames belong to the previous chunk and must not be written. The
result opens the source at the later start (so the audio and frame times start there too) and
carries one layer with every earlier stage's changed pixels, so nothing is re-computed and the
model files that shaped the frames stay recorded.
"""
from __future__ import annotations

from dataclasses import replace

from .frames import FrameSequence, Layer, encode_diff_chunk
from .stages import Hooks
from .store import ChunkStore, stage_key


def trim_leading(seq: FrameSequence, drop: int, store_root: str, hooks: Hooks | None = None) -> FrameSequence:
    """``seq`` without its first ``drop`` frames (0 returns ``seq`` itself)."""
    hooks = hooks or Hooks()
    if drop < 0:
        raise ValueError(f"cannot drop {drop} frames: give 0 or more")
    if drop == 0:
        return seq
    if drop >= seq.count:
        raise ValueError(f"dropping {drop} frames would leave nothing of a {seq.count}-frame sequence")
    base = replace(seq.original(), start=seq.start + drop * seq.stride, count=seq.count - drop)
    if not seq.layers:
        return base
    key = stage_key("trim", seq.key, drop)
    store = ChunkStore(store_root, key, {"stage": "trim", "drop": drop, "from": seq.key})
    # The input's frames, re-cut into the trimmed sequence's chunks, against its original pixels.
    edited = (f for _, chunk in seq.iter_chunks() for f in chunk)
    for _ in range(drop):
        next(edited)
    for c, before in base.iter_chunks():
        hooks.check_interrupt()
        after = [next(edited) for _ in before]
        if not store.has(c):
            store.save(c, encode_diff_chunk(before, after))
        hooks.progress(len(before))
    models = tuple(dict.fromkeys(seq.model_files()))
    return base.with_layer(Layer("trim", str(store.dir.parent), key, models))
