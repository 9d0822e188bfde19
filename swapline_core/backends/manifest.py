"""The models a result was made with, as provenance and the audit log record them."""
from __future__ import annotations

import os

from ..provenance.hashing import sha256_file
from .catalog import licence_of

# Model files are hashed once per (path, size, mtime): provenance names every model by sha256,
# and re-hashing a 500 MB swapper for every job would cost seconds.
_MODEL_HASHES: dict[tuple, str] = {}


def model_manifest(files) -> list[dict]:
    """[(role, path[, sha256 loaded]), ...] -> [{"role", "name", "sha256", "licence", "commercial"}, ...]
    without duplicates.

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
        lic = licence_of(path)
        out.append({"role": role, "name": os.path.basename(path), "sha256": sha,
                    "licence": lic["licence"], "commercial": lic["commercial"]})
    return out
