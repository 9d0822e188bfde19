"""On-disk chunk store: what makes long clips constant-memory and interrupted jobs resumable.

Each stage writes one file per chunk of frames into a folder named by the hash of everything
that determines its result (input content, frame range, upstream stages, parameters, model
files). A chunk is written to a temporary name and renamed into place, so a chunk file that
exists is complete; re-running the same stage after an interrupt or a crash loads the finished
chunks and computes only the rest.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

# Bumped whenever a stage's algorithm changes its output, so stale chunks are never reused.
# 6: the mask stack, guards, small-face crops, QA expression profiles and the classical swap's
# colour transfer and source occlusion (issue 13) all changed outputs after 5.
# 7: the classical swap's source occlusion also judges the cheeks (strands of hair).
# 8: the built-in occluder tells sunlit skin from bright objects (occlusion._glare).
# 9: colours skin never has are occluders (masks/chroma.py); restore and refine leave the faces
#    the swap refused.
# 10: busy texture above the brows is an occluder (masks/texture.py: hats, headbands, hair).
# 11: thin lines around the eyes keep the target's pixels (masks/wires.py: wire glasses frames).
# 12: skin samples of a colour skin never has are not a skin tone, and off-hue blobs are not glare
#     (goggles and visors over the eyes are kept).
# 13: skin samples that match the background beside the face are not a skin tone (masks/beside.py).
# 14: a glasses rim closed round an eye keeps the target's pixels with its lens (masks/rims.py).
ALGORITHM_VERSION = 14


def stage_key(*parts) -> str:
    blob = json.dumps([ALGORITHM_VERSION, parts], sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:24]


class ChunkStore:
    def __init__(self, root: str | os.PathLike, key: str, meta: dict | None = None):
        self.dir = Path(root) / key
        self.key = key
        self.dir.mkdir(parents=True, exist_ok=True)
        meta_path = self.dir / "stage.json"
        if meta is not None and not meta_path.exists():
            self._atomic_write(meta_path, json.dumps(meta, indent=1, default=str).encode())
        # the running job's lease on this entry, and its last use for the retention sweeper
        from ..provenance.jobs import note_cache_use

        note_cache_use(self.dir)

    def path(self, chunk: int) -> Path:
        return self.dir / f"chunk_{chunk:06d}.npz"

    def has(self, chunk: int) -> bool:
        return self.path(chunk).exists()

    def load(self, chunk: int, names: tuple[str, ...] | None = None) -> dict[str, np.ndarray]:
        """The chunk's arrays; with ``names``, only those of them it holds (the others are not
        inflated: a swap layer's records without its pixels)."""
        try:
            z = np.load(self.path(chunk), allow_pickle=False)
        except FileNotFoundError:
            from ..errors import SwaplineError

            raise SwaplineError(
                f"chunk {chunk} of cached stage {self.key} is gone from the stage cache (removed by the "
                "retention policy or a deletion request after this frame sequence was made): run the "
                "workflow again; if ComfyUI reuses its cached result, free its node cache first "
                "(Free model and node cache, or POST /free)") from None
        with z:
            return {k: z[k] for k in z.files if names is None or k in names}

    def save(self, chunk: int, arrays: dict[str, np.ndarray]) -> None:
        # An .npz (np.load reads it) deflated at level 1: with the swap layers' zeroed, row-filtered
        # pixels (frames._changed_only) a 720p job's layers take ~0.09 MB per frame; level 6 took
        # twice as long for 3 % less. Chunks saved uncompressed by earlier versions load the same.
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
            for name, value in arrays.items():
                with z.open(name + ".npy", "w", force_zip64=True) as f:
                    np.lib.format.write_array(f, np.asanyarray(value), allow_pickle=False)
        self._atomic_write(self.path(chunk), buf.getvalue())

    def done_chunks(self) -> list[int]:
        return sorted(int(p.stem.split("_")[1]) for p in self.dir.glob("chunk_*.npz"))

    def _atomic_write(self, path: Path, data: bytes) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


def model_stamp(obj) -> list:
    """(role, file name, sha256 of the bytes loaded) of every model file an analyzer/swapper uses:
    part of stage keys, so chunks made by other weights are never reused."""
    from ..backends.cache import loaded_model_files

    return [[role, os.path.basename(path), sha] for role, path, sha in loaded_model_files(obj)]


def faces_key(faces) -> str:
    """Hash of every face box and keypoints of a FaceSet (and its shot cuts, which reset per-shot
    smoothing downstream): downstream stage keys depend on the tracks."""
    boxes = [[f.bbox.tolist(), f.kps.tolist()] for fr in faces.frames for f in fr.faces]
    cuts = [int(c) for c in getattr(faces, "cuts", ())]
    # Without cuts the key is what it was before cuts existed, so earlier caches stay valid.
    return stage_key(boxes, cuts) if cuts else stage_key(boxes)
