"""ChunkStore: content-addressed, atomic, idempotent; local folders, fsspec memory:// and (when
moto and s3fs are importable) an S3 emulator."""
from __future__ import annotations

import socket
import threading
import uuid
from pathlib import Path

import pytest
from swapline_farm.store import ChunkStore


def payload(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def exercise(store: ChunkStore, tmp_path: Path) -> None:
    """The behaviour every backend must show."""
    key = "a1b2c3d4e5f60718"
    assert not store.has(key)
    src = payload(tmp_path, "chunk.mp4", b"x" * 300_000 + b"end")
    url = store.publish(key, src)
    assert url == store.path_for(key) and key in url
    assert store.has(key) and store.keys() == [key]
    got = store.fetch(key, tmp_path / "back" / "chunk.mp4")
    assert got.read_bytes() == src.read_bytes()
    # idempotent: a second publish under the same key writes nothing (the first result stands)
    other = payload(tmp_path, "other.mp4", b"different")
    assert store.publish(key, other) == url
    assert store.fetch(key, tmp_path / "again.mp4").read_bytes() == src.read_bytes()
    # no temp files are left behind or listed
    assert store.keys() == [key]
    with pytest.raises(KeyError, match="not in the store"):
        store.fetch("ffff000011112222", tmp_path / "x")
    with pytest.raises(FileNotFoundError):
        store.publish("ffff000011112222", tmp_path / "absent.mp4")
    for bad in ("../etc", "a/b", ".hidden", "x", ""):
        with pytest.raises(ValueError):
            store.path_for(bad)
    store.remove(key)
    assert not store.has(key) and store.keys() == []


def test_local_folder(tmp_path):
    root = tmp_path / "store"
    store = ChunkStore(str(root))
    exercise(store, tmp_path)
    store.publish("abcdef0123456789", payload(tmp_path, "c.bin", b"123"))
    assert (root / "ab" / "abcdef0123456789").read_bytes() == b"123"        # <root>/<key[:2]>/<key>
    assert ChunkStore(f"file://{root}").has("abcdef0123456789")             # file:// URL: the same folder
    assert not [p for p in root.rglob(".*")]                                 # no partial files


def test_local_publish_is_atomic_under_concurrency(tmp_path):
    """Eight threads publish the same key at once: one complete object, nothing partial, ever."""
    store = ChunkStore(str(tmp_path / "store"))
    data = bytes(range(256)) * 8192                                          # 2 MiB
    src = payload(tmp_path, "c.bin", data)
    seen_partial = []
    stop = threading.Event()

    def reader():
        path = Path(store.path_for("0123456789abcdef"))
        while not stop.is_set():
            if path.exists() and path.read_bytes() != data:
                seen_partial.append(True)

    r = threading.Thread(target=reader)
    r.start()
    workers = [threading.Thread(target=store.publish, args=("0123456789abcdef", src)) for _ in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    stop.set()
    r.join()
    assert not seen_partial
    assert Path(store.path_for("0123456789abcdef")).read_bytes() == data
    assert store.keys() == ["0123456789abcdef"]


def test_fsspec_memory_filesystem(tmp_path):
    root = f"memory://farm-{uuid.uuid4().hex[:8]}/chunks"
    store = ChunkStore(root)
    exercise(store, tmp_path)
    store.publish("abcdef0123456789", payload(tmp_path, "c.bin", b"123"))
    assert store.path_for("abcdef0123456789").startswith("memory://")
    # a second store object on the same URL (another process would be the same) sees it
    assert ChunkStore(root).has("abcdef0123456789")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_s3_emulator(tmp_path):
    """S3 through s3fs against moto's S3 server (both installed by scripts/setup.sh with the farm's
    test extras, so a missing one fails here rather than skipping)."""
    import moto.server as moto_server
    import s3fs  # noqa: F401
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    try:
        import boto3  # moto depends on it

        endpoint = f"http://127.0.0.1:{port}"
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test",
                     aws_secret_access_key="test").create_bucket(Bucket="farm-bucket")
        opts = {"key": "test", "secret": "test", "client_kwargs": {"endpoint_url": endpoint,
                                                                   "region_name": "us-east-1"}}
        store = ChunkStore("s3://farm-bucket/chunks", **opts)
        exercise(store, tmp_path)
        assert store.path_for("abcdef0123456789") == "s3://farm-bucket/chunks/ab/abcdef0123456789"
    finally:
        server.stop()
