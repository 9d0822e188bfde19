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
    """[(role, path), ...] -> [{"role", "name", "sha256", "licence", "commercial"}, ...] without duplicates."""
    out, seen = [], set()
    for role, path in files:
        if path in seen or not os.path.isfile(path):
            continue
        seen.add(path)
        st = os.stat(path)
        key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
        if key not in _MODEL_HASHES:
            _MODEL_HASHES[key] = sha256_file(path)
        from ..backends.catalog import licence_of

        lic = licence_of(path)
        out.append({"role": role, "name": os.path.basename(path), "sha256": _MODEL_HASHES[key],
                    "licence": lic["licence"], "commercial": lic["commercial"]})
    return out
