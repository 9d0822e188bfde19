"""A model replaced on disk is reloaded, and provenance names the bytes that actually ran."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from devtools.synthetic_models import MODEL_FILES, ensure_cache
from swapline_core.backends.cache import cached, loaded_model_files
from swapline_core.backends.manifest import model_manifest
from swapline_core.provenance.hashing import sha256_file


def _other_swapper(src, dst):
    """Same signature, different emap: another model under the same file name."""
    import onnx
    from onnx import numpy_helper

    proto = onnx.load(str(src))
    emap = numpy_helper.to_array(proto.graph.initializer[-1]) * -1.0
    proto.graph.initializer[-1].CopyFrom(numpy_helper.from_array(emap.astype(np.float32), "emap"))
    onnx.save(proto, str(dst))


@pytest.fixture(scope="module")
def swappers(tmp_path_factory):
    d = tmp_path_factory.mktemp("swappers")
    a = d / "a.onnx"
    shutil.copy(ensure_cache() / MODEL_FILES["swapper"], a)
    _other_swapper(a, d / "b.onnx")
    return a, d / "b.onnx"


def test_replaced_swapper_is_reloaded_and_each_load_keeps_its_own_hash(tmp_path, swappers):
    from swapline_core.backends.inswapper import InSwapper

    a, b = swappers
    live = tmp_path / "inswapper_128.onnx"
    shutil.copy(a, live)

    def load():
        return cached("inswapper-test", str(live), ("CPU",), lambda: InSwapper(str(live), "CPU"))

    first = load()
    assert load() is first
    sha_a = sha256_file(a)
    assert loaded_model_files(first) == [("swapper", str(live), sha_a)]

    shutil.copy(b, live)                       # replaced while "the server runs"
    st = os.stat(live)
    os.utime(live, ns=(st.st_atime_ns, st.st_mtime_ns + 10_000_000))  # coarse-mtime file systems
    second = load()
    assert second is not first
    assert not np.allclose(second.emap, first.emap)
    sha_b = sha256_file(b)
    assert loaded_model_files(second) == [("swapper", str(live), sha_b)]
    # the old model's manifest still names the old bytes, though the file on disk is now b
    assert model_manifest(loaded_model_files(first))[0]["sha256"] == sha_a
    assert model_manifest(loaded_model_files(second))[0]["sha256"] == sha_b


def test_model_stamp_follows_loaded_bytes(tmp_path, swappers):
    from swapline_core.backends.inswapper import InSwapper
    from swapline_core.video.store import model_stamp

    a, _ = swappers
    live = tmp_path / "inswapper_128.onnx"
    shutil.copy(a, live)
    model = cached("inswapper-test", str(live), ("CPU",), lambda: InSwapper(str(live), "CPU"))
    assert model_stamp(model) == [["swapper", "inswapper_128.onnx", sha256_file(a)]]
