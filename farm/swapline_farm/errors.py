"""How a chunk failed decides what the coordinator does next.

TransientError: the worker died, ran out of memory, lost its connection or timed out; the chunk is
retried with exponential backoff and jitter, on another worker where possible.
InputError: the input itself is bad (corrupt clip, no face, missing model, a prompt ComfyUI
rejects); retrying cannot help, so the job fails at once with the node's own message.
"""
from __future__ import annotations


class FarmError(Exception):
    """Base class; ``details`` carries the structured error (e.g. ComfyUI's execution_error)."""

    def __init__(self, message: str, details: dict | None = None):
        super().__init__(message)
        self.details = details or {}


class TransientError(FarmError):
    pass


class InputError(FarmError):
    pass


class ChunkTimeout(TransientError):
    pass


# ComfyUI reports a CUDA/CPU out-of-memory as an execution_error, but it is transient: another
# worker (or the same one after its memory is freed) can run the chunk.
_OOM_MARKERS = ("OutOfMemoryError", "out of memory", "CUDA error: out of memory", "MemoryError")


def classify_execution_error(data: dict) -> FarmError:
    """ComfyUI's execution_error payload -> InputError (the node's message) or TransientError (OOM)."""
    kind = str(data.get("exception_type", ""))
    msg = str(data.get("exception_message", "")).strip()
    text = f"{data.get('node_type')} (node {data.get('node_id')}) failed: {kind}: {msg}"
    if any(m in kind or m in msg for m in _OOM_MARKERS):
        return TransientError(text, data)
    return InputError(text, data)


def error_class(exc: BaseException) -> str:
    """A short label for metrics and ledgers."""
    return type(exc).__name__
