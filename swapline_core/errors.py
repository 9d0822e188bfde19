"""Errors that carry what a user needs to fix the problem: the file, where we looked, what to do."""
from __future__ import annotations

README_MODELS = "docs/models.md"


class SwaplineError(RuntimeError):
    """Base class; the message is shown verbatim in ComfyUI's error dialog."""


class MissingModelError(SwaplineError):
    def __init__(self, filename: str, searched: list[str], hint: str = ""):
        self.filename = filename
        self.searched = list(searched)
        where = "\n".join(f"  - {d}" for d in self.searched) or "  (no folder configured)"
        msg = (f"Model file '{filename}' was not found. Folders searched:\n{where}\n"
               f"Put the file in one of these folders (see {README_MODELS} for where to get it)."
               + (f" {hint}" if hint else ""))
        super().__init__(msg)


class BadModelError(SwaplineError):
    def __init__(self, path: str, problem: str):
        self.path = path
        super().__init__(f"Model file '{path}' cannot be used: {problem}")


class NoFaceError(SwaplineError):
    pass
