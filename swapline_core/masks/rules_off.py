"""Which rules switched themselves off for a face, for that face's record.

Why: ``beside.not_background`` keeps every skin sample when it would drop half of them or more
(an unusual face rather than a background), ``beside`` needs the 68 landmarks and ``texture`` a
face of ``texture.MIN_FACE`` px. That is the right call, but it was silent: a face masked without
the rule looked, in the swap report, like any other (issue 50). These rules run deep inside
``builtin.skin_view``, whose answers are used in place, so they note the switch-off here and the
mask stack collects the notes around each ``skin_view`` call (on the same thread: a context
variable, so threads never mix notes) and puts them in the face's ``masks.rules`` record (and the
skin-sample rule's, keyed by function, as ``skin_rules_off``).
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_NOTES: ContextVar[dict | None] = ContextVar("swapline_skin_rules_off", default=None)


def note(rule: str, why: str) -> None:
    """Record that ``rule`` switched itself off, and why; nothing when no one is collecting."""
    notes = _NOTES.get()
    if notes is not None:
        notes[rule] = why


@contextmanager
def collecting() -> Iterator[dict[str, str]]:
    """{rule: why} of the rules that switched themselves off inside the block."""
    notes: dict[str, str] = {}
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)
