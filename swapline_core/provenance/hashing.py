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


# Model files are hashed once per (path, size, mtime): provenance names every model by sha256,
# and re-hashing a 500 MB swapper for every job would cost seconds.
_MODEL_HASHES: dict[tuple, str] = {}


def model_manifest(files) -> list[dict]:
    """[(role, path[, sha256 loaded]), ...] -> [{"role", "name", "sha256"}, ...] without duplicates.

    A given sha256 (recorded when the model was loaded) wins: the file at ``path`` may have been
    replaced since, and the manifest must name the bytes that ran.
    """
    out, seen = [], set()
    for role, path, *loaded in files:
        if path in seen or (not loaded and not os.path.isfile(path)):
            continue
        seen.add(path)
        if loaded:
            sha = loaded[0]
        else:
            st = os.stat(path)
            key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
            if key not in _MODEL_HASHES:
                _MODEL_HASHES[key] = sha256_file(path)
            sha = _MODEL_HASHES[key]
        out.append({"role": role, "name": os.path.basename(path), "sha256": sha})
    return out
