"""Streaming SHA-256 of files: media and model weights can be gigabytes; never read them whole."""
from __future__ import annotations

import hashlib
import os

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


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
