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
        if loaded and loaded[0] is None and not os.path.isfile(path):
            # a model whose file could not be known (e.g. built by a node that is no loader):
            # named as such rather than left out
            out.append({"role": role, "name": path, "sha256": None, "licence": "unknown (file unknown)",
                        "commercial": "unknown"})
            continue
        # one file can serve two roles (a checkpoint's UNet and its VAE): both are stated
        if (role, path) in seen or (not loaded and not os.path.isfile(path)):
            continue
        seen.add((role, path))
        if loaded and loaded[0] is not None:
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


def stage_manifest(records) -> list[dict]:
    """StageRecords -> the manifest's per-stage entries: method, how its pixels were made,
    details, and each model with role, file name, sha256 and licence."""
    return [{"stage": r.stage, "method": r.method, "generation": r.generation,
             **{str(k): v for k, v in r.detail},
             "models": model_manifest(r.models)} for r in records]
