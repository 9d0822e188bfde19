"""Guards: decide per face whether a swap can be done well, before anything is pasted.

Scaffold: the plausibility and competence checks land here (issue 13, items 4-5)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GuardOptions:
    enabled: bool = True

    def to_json(self) -> dict:
        return {"enabled": self.enabled}


def screen(swapper, frames, faces, opts: GuardOptions, context=None) -> list[list[str | None]]:
    """Per frame, per face: None (swap it) or the reason it is left untouched."""
    return [[None for _ in fs] for fs in faces]
