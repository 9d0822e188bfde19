"""Build model files once into a cache folder (keyed by builder version), then hard-link them
where tests and benchmarks want them: rebuilding stand-ins costs seconds, linking costs nothing."""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
from pathlib import Path


def _manifest_ok(cache: Path, files: dict[str, str]) -> bool:
    try:
        manifest = json.loads((cache / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    for rel in files.values():
        st = (cache / rel).stat() if (cache / rel).is_file() else None
        if st is None or manifest.get(rel) != [st.st_size, st.st_mtime_ns]:
            return False  # missing, or written through a hard link
    return True


def build_cached(cache: Path, files: dict[str, str], builders: dict) -> Path:
    """Build ``files`` (role -> relative path) with ``builders`` (role -> fn(path)) into ``cache``
    unless a complete, unmodified build is there; return ``cache``."""
    if _manifest_ok(cache, files):
        return cache
    cache.parent.mkdir(parents=True, exist_ok=True)
    # Parallel test workers share one cache: one builds while the others wait on the lock.
    with open(cache.parent / f".{cache.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _manifest_ok(cache, files):
            return cache
        tmp = Path(tempfile.mkdtemp(prefix=f".{cache.name}-", dir=cache.parent))
        tmp.chmod(0o755)
        try:
            for role, rel in files.items():
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                builders[role](tmp / rel)
            stats = {rel: (tmp / rel).stat() for rel in files.values()}
            (tmp / "manifest.json").write_text(json.dumps(
                {rel: [st.st_size, st.st_mtime_ns] for rel, st in stats.items()}, indent=1))
            if cache.exists():
                shutil.rmtree(cache)
            tmp.rename(cache)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return cache


def link_all(cache: Path, files: dict[str, str], models_dir: Path) -> dict[str, Path]:
    out = {}
    for role, rel in files.items():
        _link(cache / rel, Path(models_dir) / rel)
        out[role] = Path(models_dir) / rel
    return out


def _link(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists() or dst.is_symlink():
        dst.unlink()
    try:
        os.link(src, dst)
    except OSError:  # another file system, or links not allowed
        shutil.copy2(src, dst)
