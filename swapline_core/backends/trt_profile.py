"""TensorRT optimisation profiles: the batch sizes each session will see, as provider options.

Why: given a graph with a dynamic batch axis and no ``trt_profile_*_shapes``, onnxruntime's
TensorRT EP builds its engine for the first shape it meets and builds again (minutes) when a
later batch falls outside the shapes it has seen: a chunk with more faces, the ragged last batch
of a clip. An explicit profile gives one engine for every batch from 1 to the largest the code
sends, tuned for the usual one.

Format (onnxruntime's TensorRT EP options): each of ``trt_profile_min_shapes``,
``trt_profile_opt_shapes`` and ``trt_profile_max_shapes`` is ``"name:d0xd1x...,name2:..."``;
all three are given together and must list every input with a dynamic dimension. An input whose
other dynamic dimensions are unknown here (a detector's "?" x "?" without a det_size) gets no
profile at all, as before: a partial profile is an error in onnxruntime.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .onnx_batch import DEFAULT_MAX_BATCH

KEYS = ("trt_profile_min_shapes", "trt_profile_opt_shapes", "trt_profile_max_shapes")


@dataclass(frozen=True)
class Batches:
    """Items per run: ``opt`` the usual, ``max`` the largest the code sends (min is always 1)."""
    opt: int
    max: int


# A chunk's faces (swapper, mask models, recogniser, landmarks): one face per frame of a default
# 16-frame chunk (video.frames.DEFAULT_CHUNK), never more than BatchRun's max_batch per run.
FACES = Batches(opt=16, max=DEFAULT_MAX_BATCH)
# Detector frames: every 8th frame of a 16-frame chunk (Track Faces' default detect_every) is 2,
# a chunk's whole batch of frames at most BatchRun's max_batch.
DETECTOR = Batches(opt=2, max=DEFAULT_MAX_BATCH)
# GPEN: the restore nodes' 'batch' widget (default 4, at most 64) is sent as one run.
RESTORER = Batches(opt=4, max=64)
# One row per run (FaceFusion's embedding converters are run embedding by embedding).
SINGLE = Batches(opt=1, max=1)


def graph_inputs(path: str) -> list[tuple[str, list]]:
    """(name, shape) of the graph's real inputs (not initialisers); a dimension is an int when
    fixed, else its symbolic name (or None). Read with onnx, weights left on disk where external."""
    import onnx

    graph = onnx.load(path, load_external_data=False).graph
    weights = {t.name for t in graph.initializer}
    out = []
    for v in graph.input:
        if v.name in weights:
            continue
        dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else (d.dim_param or None)
                for d in v.type.tensor_type.shape.dim]
        out.append((v.name, dims))
    return out


def profile_options(inputs: Sequence[tuple[str, list]], batches: Batches,
                    dims: dict[int, int] | None = None) -> dict[str, str]:
    """The three ``trt_profile_*_shapes`` options for these inputs, or {} when none is dynamic or
    one has a dynamic dimension besides the batch that ``dims`` (axis -> size) does not fix."""
    dims = dims or {}
    rows: list[tuple[str, list[int], list[int]]] = []     # name, batches (min, opt, max), other dims
    for name, shape in inputs:
        if not shape or all(isinstance(d, int) for d in shape):
            continue                                       # static: TensorRT needs no profile for it
        rest = []
        for axis, d in enumerate(shape[1:], 1):
            size = d if isinstance(d, int) else dims.get(axis)
            if size is None:
                return {}
            rest.append(int(size))
        first = shape[0]
        sizes = [first] * 3 if isinstance(first, int) else [1, batches.opt, batches.max]
        rows.append((name, sizes, rest))
    if not rows:
        return {}
    return {key: ",".join(f"{name}:" + "x".join(str(d) for d in (sizes[i], *rest)) for name, sizes, rest in rows)
            for i, key in enumerate(KEYS)}


def profile_for(path: str, batches: Batches, dims: dict[int, int] | None = None) -> dict[str, str]:
    """``profile_options`` of an ONNX file's inputs ({} for a file onnx cannot read: onnxruntime
    then reports it, in the caller's words)."""
    try:
        return profile_options(graph_inputs(path), batches, dims)
    except Exception:  # onnx raises several types for unreadable files; the session load explains
        return {}
