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
