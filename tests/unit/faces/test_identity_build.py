"""faces.identity.build_from_images (what Build Face Model runs) with the built-in analyzer on real faces."""
from __future__ import annotations

import numpy as np
import pytest

from devtools.media import HANKS, T1, insightface_image, rgb
from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
from swapline_core.errors import NoFaceError
from swapline_core.faces import identity


@pytest.fixture(scope="module")
def analyzer():
    return BuiltinAnalyzer()


def test_largest_face_of_each_image_is_embedded(analyzer):
    t1, hanks = rgb(insightface_image(T1)), rgb(insightface_image(HANKS))
    fm = identity.build_from_images(analyzer, [hanks, hanks[:, ::-1].copy()])
    assert fm.recognizer == analyzer.recognizer_name
    assert fm.metadata["count"] == 2 and len(fm.metadata["source_sha256"]) == 2
    assert np.isclose(np.linalg.norm(fm.embedding), 1.0, atol=1e-5)
    assert fm.face.landmarks is not None                 # the built-in analyzer has 68 points
    group = identity.build_from_images(analyzer, [t1])
    assert float(np.dot(group.embedding, fm.embedding)) < float(np.dot(fm.embedding, fm.embedding))


def test_an_image_without_a_face_is_named(analyzer):
    hanks = rgb(insightface_image(HANKS))
    with pytest.raises(NoFaceError, match=r"source image\(s\) \[1\]"):
        identity.build_from_images(analyzer, [hanks, np.full((200, 200, 3), 127, np.uint8)])
