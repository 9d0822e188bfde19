"""Build Face Model says on the node when its source photo is too small or soft (issue 49 item B),
and the swap nodes' reports carry that warning from the face model."""
from __future__ import annotations

import functools
import importlib

import numpy as np
import pytest
import torch

from bench.generalization.devset import SMALL_FROM, small_source
from bench.quality import panel as qpanel
from devtools.inprocess import import_pack
from devtools.media import SAMPLES, T1, insightface_image, rgb


def core(name: str):
    """The pack's own copy of a core module (``swapline.swapline_core``): its types are the ones
    the nodes check against."""
    import_pack()
    return importlib.import_module(f"swapline.swapline_core.{name}")


@functools.cache
def analyzer():
    return core("backends.builtin_analyzer").BuiltinAnalyzer()


@pytest.fixture(scope="module")
def nodes():
    import_pack()
    return importlib.import_module("swapline.nodes.face_model"), importlib.import_module("swapline.nodes.swap")


def tensor(image: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(image[None].astype(np.float32) / 255.0)


def small() -> np.ndarray:
    face = next(f for f in qpanel.PANEL if f.name == SMALL_FROM)
    return small_source(qpanel.crop(rgb(insightface_image(T1)), face.box))


def test_a_small_source_is_warned_about_on_the_node(nodes):
    face_model, _ = nodes
    out = face_model.BuildFaceModel.execute(images=tensor(small()), analyzer=analyzer(), reduce="mean")
    fm = out.result[0]
    check = fm.metadata["source_check"]
    assert check["status"] == "warn"
    text = out.ui["text"][0]
    assert text.startswith("WARNING: ") and check["messages"][0] in text, text
    assert "at least 32 px between the eyes" in text
    assert "fail_on_source_warning" in text                       # what the QA gate will do with it
    assert out.ui["swapline_source_check"][0] == check          # for API users reading the history


def test_a_clean_source_shows_no_warning(nodes):
    face_model, _ = nodes
    out = face_model.BuildFaceModel.execute(images=tensor(rgb(SAMPLES / "source_face.png")), analyzer=analyzer(),
                                            reduce="mean")
    assert "WARNING" not in out.ui["text"][0]
    assert out.ui["swapline_source_check"][0]["status"] == "ok"


def test_the_swap_report_carries_the_face_models_warning(nodes):
    ClassicalSwapper = core("backends.classical").ClassicalSwapper
    FaceSet, FrameFaces = core("types").FaceSet, core("types").FrameFaces
    face_model, swap = nodes
    target = rgb(SAMPLES / "target_reference.png")
    faces = FaceSet([FrameFaces(0, analyzer().detect([target])[0], target.shape[1], target.shape[0])], analyzer())
    reports = {}
    for name, image in (("small", small()), ("clean", rgb(SAMPLES / "source_face.png"))):
        fm = face_model.BuildFaceModel.execute(images=tensor(image), analyzer=analyzer(), reduce="mean").result[0]
        out = swap.SwapFaces.execute(images=tensor(target), faces=faces, face_model=fm, swapper=ClassicalSwapper(),
                                     color_match=True)
        reports[name] = out.ui["swapline_swap"][0]
    assert reports["small"]["source_warnings"] and "looks enlarged" in reports["small"]["source_warnings"][0]
    assert "source_warnings" not in reports["clean"]
