"""Mask models are identified by the sha256 of their bytes, like swappers (issue 32, item 3 of the
issue / item 2 of its brief): a mask model replaced by another file of the same name and size
changes the swap stage's key and its stored manifest, so a resumed job reuses no chunk the old
weights cut."""
from __future__ import annotations

import json
import os
import shutil

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from PIL import Image

from devtools.media import REPO
from devtools.synthetic_masks import build_mask_models
from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
from swapline_core.backends.cache import file_sha256
from swapline_core.backends.classical import ClassicalSwapper
from swapline_core.faces import identity as face_model
from swapline_core.masks import MaskOptions
from swapline_core.swap.chunk import SwapOptions
from swapline_core.video import stages as pipeline
from swapline_core.video.frames import FrameSequence

CLIP = REPO / "assets" / "samples" / "kling_avatar_clip.mp4"
SOURCE = REPO / "assets" / "samples" / "source_face.png"


def _same_size_other_weights(src, dst) -> None:
    """Another XSeg file of exactly the same size: every weight negated (raw float bytes, same count)."""
    model = onnx.load(str(src))
    for init in model.graph.initializer:
        arr = numpy_helper.to_array(init)
        if arr.dtype.kind == "f":
            init.CopyFrom(numpy_helper.from_array(-arr, init.name))
    tmp = str(dst) + ".new"
    onnx.save(model, tmp)
    os.replace(tmp, dst)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    an = BuiltinAnalyzer()
    source = face_model.build_from_images(an, [np.array(Image.open(SOURCE).convert("RGB"))])
    seq = FrameSequence.open(str(CLIP), count=4, chunk=2)
    faces, _ = pipeline.track_faces(seq, an, str(tmp_path_factory.mktemp("t")), pipeline.Hooks(), mode="largest")
    return an, source, seq, faces


def test_same_size_replacement_of_a_mask_model_resumes_nothing(setup, tmp_path):
    an, source, seq, faces = setup
    models = build_mask_models(tmp_path / "built")
    xseg = tmp_path / "facemask" / "xseg_1.onnx"
    xseg.parent.mkdir()
    shutil.copy(models["occluder"], xseg)
    opts = SwapOptions(masks=MaskOptions(occlusion="builtin+model", occluder_path=str(xseg), temporal=0))
    store = tmp_path / "store"

    def run():
        out, rep = pipeline.swap_frames(seq, faces, source, ClassicalSwapper(), an, str(store), pipeline.Hooks(), opts)
        return out, rep

    _, first = run()
    assert first.chunks_resumed == 0 and seq.n_chunks == 2
    _, again = run()
    assert again.chunks_resumed == seq.n_chunks, "an unchanged mask model resumes every chunk"

    old_sha, old_size = file_sha256(str(xseg)), xseg.stat().st_size
    _same_size_other_weights(models["occluder"], xseg)
    assert xseg.stat().st_size == old_size, "the replacement must keep the size to test anything"
    assert file_sha256(str(xseg)) != old_sha

    _, after = run()
    assert after.chunks_resumed == 0, "chunks cut by the old mask model were reused"
    assert after.key != first.key
    # the stage's stored manifest names the mask model by the hash of its bytes
    meta = json.loads((store / after.key / "stage.json").read_text())
    assert meta["masks"]["occluder"] == ["xseg_1.onnx", file_sha256(str(xseg))]
