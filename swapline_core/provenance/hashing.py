"""Streaming SHA-256 of files: media and model weights can be gigabytes; never read them whole."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

_CHUNK = 1 << 20


def sha256_file(path: str | os.PathLike, chunk_size: int = _CHUNK) -> str:
    """Hex SHA-256 of the file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        # readinto a reused buffer keeps memory flat for huge videos
        buf = bytearray(chunk_size)
        view = memoryview(buf)
        while True:
            n = f.readinto(buf)
            if not n:
                break
            h.update(view[:n])
    return h.hexdigest()


def sha256_media(path: str | os.PathLike) -> str:
    """A file's SHA-256; for a folder (an image-sequence input) the SHA-256 of its visible files'
    names and SHA-256s in name order: one digest of the input that changes when any frame does."""
    p = Path(path)
    if not p.is_dir():
        return sha256_file(p)
    h = hashlib.sha256()
    for f in sorted(q for q in p.iterdir() if q.is_file() and not q.name.startswith(".")):
        h.update(f"{f.name}\t{sha256_file(f)}\n".encode())
    return h.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
