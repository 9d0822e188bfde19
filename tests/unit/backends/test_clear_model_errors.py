"""Broken model files and too-small images fail with errors a user can act on."""
from __future__ import annotations

import numpy as np
import pytest

from swapline_core.backends.catalog import KNOWN_MODELS
from swapline_core.backends.onnx_sessions import create_session
from swapline_core.errors import BadModelError


@pytest.mark.parametrize("content", [b"", bytes(np.random.default_rng(0).integers(0, 256, 4096, np.uint8))])
def test_empty_or_random_onnx_says_size_expected_hash_and_download_again(tmp_path, content):
    path = tmp_path / "inswapper_128.onnx"
    path.write_bytes(content)
    with pytest.raises(BadModelError) as exc:
        create_session(str(path), "CPU")
    msg = str(exc.value)
    known = next(m for m in KNOWN_MODELS if m.filename == "inswapper_128.onnx")
    assert f"{len(content)} bytes" in msg or (not content and "empty" in msg)
    assert str(known.size_bytes) in msg and known.sha256 in msg
    assert "download it again" in msg
    assert "Protobuf parsing failed" not in msg and "ONNXRuntimeError" not in msg


def test_tiny_source_image_is_reported_with_its_size_not_a_torch_error():
    from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer

    analyzer = BuiltinAnalyzer()
    tiny = np.full((16, 16, 3), 128, np.uint8)
    assert analyzer.detect([tiny]) == [[]]
    assert "16x16" in analyzer.skipped[0][0]["reason"] and "20 px" in analyzer.skipped[0][0]["reason"]
