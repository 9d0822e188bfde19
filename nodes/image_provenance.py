"""What made an IMAGE batch, for the signed sink: IMAGE tensors carry no metadata of their own.

Swapline's image nodes record the stages they ran (swapline_core.provenance.method.StageRecord)
against the exact tensor they return. ComfyUI hands that same object to downstream nodes, also
when it comes from the execution cache on a later prompt, so the sink finds the record by
identity. An entry lives exactly as long as its tensor. Images made by any other node have no
record, and the sink then says the method is unknown instead of guessing.
"""
from __future__ import annotations

import weakref

_RECORDS: dict[int, tuple] = {}


def record(images, stages: tuple) -> None:
    key = id(images)
    _RECORDS[key] = tuple(stages)
    weakref.finalize(images, _RECORDS.pop, key, None)


def lookup(images) -> tuple | None:
    return _RECORDS.get(id(images)) if images is not None else None


def extend(source, result, stages: tuple) -> None:
    """``result`` was made from ``source`` by ``stages``: it inherits what made ``source``."""
    record(result, (lookup(source) or ()) + tuple(stages))
