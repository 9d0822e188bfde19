"""Content-addressed chunk store: where workers publish chunk outputs and the coordinator reads them.

Keys are content addresses (a ChunkSpec's ``chunk_id`` hashes the job's content hash and the
frame range), so a key names exactly one result: publishing is idempotent (a key already there
is left alone and its location returned; a retried or timed-out-then-finished attempt of the
same chunk produces the same bytes anyway, the encoder is deterministic), and nothing is ever
overwritten in place.

Atomicity: a reader never sees half a file under a key.
- local paths (and ``file://``): write a hidden temp file in the target folder, fsync, then
  ``os.replace`` (atomic within one filesystem);
- object stores (``s3://``, ``gs://``, ``az://``...): a single PUT is atomic by the store's own
  semantics (the object appears whole or not at all), so it is written under its key directly;
- any other fsspec filesystem (``memory://``, ``sftp://``...): put to a temp name beside the
  key, then ``mv`` it into place.

Objects live under ``<root>/<key[:2]>/<key>`` so one folder never holds millions of entries.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
import uuid
from pathlib import Path

_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,199}$")
OBJECT_STORES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss"})


class ChunkStore:
    def __init__(self, root: str, **storage_options):
        """``root``: a local folder or an fsspec URL (``s3://bucket/prefix`` needs s3fs);
        ``storage_options`` go to fsspec (e.g. ``client_kwargs={"endpoint_url": ...}``)."""
        self.root = str(root)
        self.storage_options = storage_options
        if "://" not in self.root or self.root.startswith("file://"):
            local = self.root[len("file://"):] if self.root.startswith("file://") else self.root
            self._local: Path | None = Path(os.path.abspath(os.path.expanduser(local)))
            self._local.mkdir(parents=True, exist_ok=True)
            self.fs = None
            self._base = str(self._local)
            self._object_store = False
        else:
            import fsspec

            self._local = None
            try:
                self.fs, self._base = fsspec.core.url_to_fs(self.root, **storage_options)
            except (ImportError, ValueError) as e:
                raise ValueError(f"chunk store '{self.root}': {e}. For s3:// install s3fs "
                                 "(pip install s3fs) and give the endpoint/credentials") from e
            protocols = self.fs.protocol if isinstance(self.fs.protocol, (tuple, list)) else (self.fs.protocol,)
            self._object_store = bool(set(protocols) & OBJECT_STORES)
            self._base = self._base.rstrip("/")
            if not self._object_store:
                self.fs.makedirs(self._base, exist_ok=True)

    def __repr__(self) -> str:
        return f"ChunkStore({self.root!r})"

    # -- addressing ----------------------------------------------------------------------------
    @staticmethod
    def check_key(key: str) -> str:
        key = str(key)
        if not _KEY.match(key) or ".." in key:
            raise ValueError(f"chunk store key {key!r} must be 2-200 characters of letters, digits, '.', '_' "
                             "or '-' (e.g. a ChunkSpec.chunk_id)")
        return key

    def _rel(self, key) -> str:
        key = self.check_key(key)
        return f"{key[:2]}/{key}"

    def path_for(self, key) -> str:
        """Where ``key`` lives: a local path, or a URL with the store's protocol."""
        if self._local is not None:
            return str(self._local / self._rel(key))
        return self.fs.unstrip_protocol(f"{self._base}/{self._rel(key)}")

    def _fs_path(self, key) -> str:
        return f"{self._base}/{self._rel(key)}"

    # -- operations ----------------------------------------------------------------------------
    def has(self, key: str) -> bool:
        if self._local is not None:
            return (self._local / self._rel(key)).is_file()
        try:
            # no listing cache: another process (a worker) may have published since we looked
            self.fs.invalidate_cache(self._fs_path(key))
        except (AttributeError, NotImplementedError):
            pass
        return bool(self.fs.exists(self._fs_path(key)))

    def publish(self, key: str, local_file: Path) -> str:
        """Store ``local_file`` under ``key`` atomically; returns :meth:`path_for`. Idempotent:
        when the key exists already the stored object is kept and nothing is written."""
        src = Path(local_file)
        if not src.is_file():
            raise FileNotFoundError(f"cannot publish chunk {key}: '{src}' does not exist")
        dest = self.path_for(key)
        if self.has(key):
            return dest
        if self._local is not None:
            final = self._local / self._rel(key)
            final.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=f".{key}.", suffix=".partial")
            try:
                with os.fdopen(fd, "wb") as out, open(src, "rb") as inp:
                    shutil.copyfileobj(inp, out, 1 << 20)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(tmp, final)
                _fsync_dir(final.parent)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            return dest
        final = self._fs_path(key)
        if self._object_store:
            self.fs.put_file(str(src), final)
            return dest
        parent = final.rsplit("/", 1)[0]
        self.fs.makedirs(parent, exist_ok=True)
        tmp = f"{parent}/.{key}.{uuid.uuid4().hex}.partial"
        try:
            self.fs.put_file(str(src), tmp)
            self.fs.mv(tmp, final)
        finally:
            if self.fs.exists(tmp):
                self.fs.rm_file(tmp)
        return dest

    def fetch(self, key: str, dest: Path) -> Path:
        """Copy the object to ``dest`` (atomically: a temp file beside it, then rename)."""
        dest = Path(dest)
        if not self.has(key):
            raise KeyError(f"chunk {key} is not in the store {self.root} (looked at {self.path_for(key)})")
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".partial")
        os.close(fd)
        try:
            if self._local is not None:
                shutil.copyfile(self._local / self._rel(key), tmp)
            else:
                self.fs.get_file(self._fs_path(key), tmp)
            os.replace(tmp, dest)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return dest

    def keys(self) -> list[str]:
        """Every stored key (temp files excluded), sorted."""
        if self._local is not None:
            return sorted(p.name for p in self._local.glob("*/*") if p.is_file() and not p.name.startswith("."))
        try:
            found = self.fs.find(self._base)
        except FileNotFoundError:
            return []
        names = (p.rsplit("/", 1)[-1] for p in found)
        return sorted(n for n in names if not n.startswith("."))

    def remove(self, key: str) -> None:
        """Delete a key (e.g. a chunk QA rejected); missing keys are ignored."""
        if self._local is not None:
            (self._local / self._rel(key)).unlink(missing_ok=True)
        elif self.fs.exists(self._fs_path(key)):
            self.fs.rm_file(self._fs_path(key))


def _fsync_dir(folder: Path) -> None:
    # Makes the rename durable across a power cut (not possible, nor needed, on Windows).
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
