"""A model asked for by two threads at once is built once (issue 32, item 7): ComfyUI runs
prompts on one thread but nodes, routes and farm helpers load models from others, and a second
load of a 500 MB swapper doubles its memory for nothing."""
from __future__ import annotations

import threading
import time

from swapline_core.backends import cache


class _Model:
    def model_files(self):
        return []


def test_same_model_from_two_threads_is_built_once(tmp_path):
    weights = tmp_path / "model.onnx"
    weights.write_bytes(b"weights" * 1000)
    built = []
    start = threading.Barrier(2)

    def build():
        built.append(threading.get_ident())
        time.sleep(0.5)           # a load takes a while: long enough for the other thread to ask
        return _Model()

    got = [None, None]

    def load(i):
        start.wait()
        got[i] = cache.cached("test-once", str(weights), ("cpu",), build)

    threads = [threading.Thread(target=load, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(built) == 1, f"built {len(built)} times"
    assert got[0] is got[1] and got[0] is not None
    assert not cache._BUILDING, "no build lock is left behind"
    # a different key (other settings) is its own build, not blocked by or shared with this one
    other = cache.cached("test-once", str(weights), ("cuda",), build)
    assert other is not got[0] and len(built) == 2


def _weights(tmp_path, name: str, mb: int):
    p = tmp_path / name
    with open(p, "wb") as f:
        f.truncate(mb << 20)        # sparse: the size is what counts, not the disk used
    return str(p)


def test_cache_is_bounded_by_weight_bytes_least_recently_used_first(tmp_path, monkeypatch):
    monkeypatch.setenv("SWAPLINE_MODEL_CACHE_MB", "100")
    monkeypatch.setattr(cache, "_CACHE", {})
    monkeypatch.setattr(cache, "_SIZES", {})
    builds = []

    def load(name, mb):
        path = _weights(tmp_path, name, mb) if not (tmp_path / name).exists() else str(tmp_path / name)
        return cache.cached("test-size", path, (), lambda: builds.append(name) or _Model())

    big_a = load("a.onnx", 60)
    load("small.onnx", 1)
    assert cache.cache_state()["bytes"] == 61 << 20
    load("a.onnx", 60)                               # a hit: a becomes the most recently used
    assert builds == ["a.onnx", "small.onnx"]
    load("b.onnx", 60)                               # 121 MB > 100: the least recently used goes first
    assert cache.cache_state()["bytes"] == 60 << 20 and cache.cache_state()["entries"] == 1
    assert load("b.onnx", 60) is not big_a and builds[-1] == "b.onnx"
    # eight small models fit where eight slots of large ones would not
    for i in range(8):
        load(f"m{i}.onnx", 2)
    assert cache.cache_state()["entries"] == 9 and builds.count("b.onnx") == 1
    # a model larger than the whole budget still loads (and is the only one kept)
    load("huge.onnx", 150)
    assert cache.cache_state()["entries"] == 1


def test_one_build_at_a_time_also_after_a_failed_build(tmp_path):
    """Issue 50: after a failed build the caller that waited rebuilt under the old lock while a
    newcomer made a new one, so two loads of the same model ran at once."""
    weights = tmp_path / "model.onnx"
    weights.write_bytes(b"weights" * 1000)
    count = threading.Lock()
    inside, most, calls = [0], [0], [0]
    second_started = threading.Event()

    def build():
        with count:
            inside[0] += 1
            calls[0] += 1
            most[0] = max(most[0], inside[0])
            call = calls[0]
        try:
            if call == 2:
                second_started.set()
            time.sleep(0.5)        # a load takes a while: long enough for the others to ask
            if call == 1:
                raise OSError("read error")
            return _Model()
        finally:
            with count:
                inside[0] -= 1

    got, errors = {}, {}

    def load(name):
        try:
            got[name] = cache.cached("test-fail", str(weights), ("cpu",), build)
        except OSError as exc:
            errors[name] = exc

    first = threading.Thread(target=load, args=("first",))
    first.start()
    time.sleep(0.2)                # the first build is running: this one waits for it
    waiter = threading.Thread(target=load, args=("waiter",))
    waiter.start()
    assert second_started.wait(10), "the waiter never built after the first build failed"
    late = threading.Thread(target=load, args=("late",))    # arrives while the waiter builds
    late.start()
    for t in (first, waiter, late):
        t.join(10)
    assert most[0] == 1, f"{most[0]} builds of the same model ran at once"
    assert set(errors) == {"first"} and calls[0] == 2
    assert got["waiter"] is got["late"]
    assert not cache._BUILDING, "no build lock is left behind"
