"""What made an IMAGE batch, for the signed sink: IMAGE tensors carry no metadata of their own.

Swapline's image nodes record the stages they ran (swapline_core.provenance.method.StageRecord)
against the exact tensor they return. ComfyUI hands that same object to downstream nodes, also
when it comes from the execution cache on a later prompt, so the sink finds the record by
identity. An entry lives exactly as long as its tensor. Images made by any other node have no
record, and the sink then says the method is unknown instead of guessing.

The same way, an IMAGE from Swap Faces carries the boxes of the faces the swap refused (left as
they were, ``refused``), so Restore Faces after it leaves them alone as the video stages do.
"""
from __future__ import annotations

import weakref

_RECORDS: dict[int, tuple] = {}
_REFUSED: dict[int, list] = {}


def _attach(table: dict, images, value) -> None:
    key = id(images)
    table[key] = value
    weakref.finalize(images, table.pop, key, None)


def record(images, stages: tuple) -> None:
    _attach(_RECORDS, images, tuple(stages))


def record_refused(images, boxes: list) -> None:
    """``boxes``: per image of the batch, the boxes of the faces the swap refused
    (``guards.refused_boxes``); replaces what ``extend`` carried over (a second swap decides
    anew which faces it leaves)."""
    if any(boxes):
        _attach(_REFUSED, images, [list(b) for b in boxes])
    else:
        _REFUSED.pop(id(images), None)


def refused(images) -> list | None:
    """The refused faces' boxes per image of ``images`` (None: not from a swap, or none refused)."""
    return _REFUSED.get(id(images)) if images is not None else None


def lookup(images) -> tuple | None:
    return _RECORDS.get(id(images)) if images is not None else None


def extend(source, result, stages: tuple) -> None:
    """``result`` was made from ``source`` by ``stages``: it inherits what made ``source``."""
    record(result, (lookup(source) or ()) + tuple(stages))
    if refused(source):                 # the same frames, the same untouched faces
        _attach(_REFUSED, result, refused(source))
