"""The lossless bridge for in-memory clips (IMAGE + AUDIO, core Create Video): frames come back
bit-exact through FrameSequence, and the audio of a frame range is the audio of that range."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import numpy as np
import pytest

from swapline_core.video import lossless
from swapline_core.video.frames import FrameSequence
from swapline_core.video.read import frame_time

RATE = 44100


def clip(n=10, h=35, w=47):
    rng = np.random.default_rng(0)
    return [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for _ in range(n)]


def tone(seconds: float) -> np.ndarray:
    t = np.arange(round(RATE * seconds)) / RATE
    return (0.5 * np.stack([np.sin(2 * np.pi * 440 * t), 0.5 * np.sin(2 * np.pi * 220 * t)])).astype(np.float32)


def test_frames_are_bit_exact_and_audio_is_kept(tmp_path):
    frames, audio = clip(), tone(10 / 24)
    path = tmp_path / "x.nut"
    assert lossless.write_lossless(path, frames, 24, (audio, RATE)) == 10
    seq = FrameSequence.open(str(path), chunk=4)                    # odd size, 3 chunks
    assert (seq.count, seq.fps, seq.width, seq.height, seq.has_audio) == (10, 24.0, 47, 35, True)
    assert frame_time(path, 5) == 5 / 24                            # the exact rate, not a measured one
    got = [f for _, c in seq.iter_chunks() for f in c]
    assert len(got) == 10 and all(np.array_equal(a, b) for a, b in zip(got, frames))

    whole, rate = lossless.read_audio(path, 0, 10 / 24)
    assert rate == RATE and whole.shape == audio.shape
    np.testing.assert_allclose(whole, audio, atol=0)                # float PCM: bit-exact
    for start in (2, 5):
        part, _ = lossless.read_audio(path, start, 4 / 24)
        o = round(frame_time(path, start) * RATE)
        assert part.shape == (2, round(4 / 24 * RATE))
        np.testing.assert_allclose(part, audio[:, o:o + part.shape[1]], atol=0)


def test_no_audio_and_bad_audio(tmp_path):
    path = tmp_path / "silent.nut"
    lossless.write_lossless(path, clip(3), 15)
    assert not FrameSequence.open(str(path)).has_audio
    assert lossless.read_audio(path, 0, 0.2) is None
    with pytest.raises(ValueError, match="channels"):
        lossless.write_lossless(tmp_path / "bad.nut", clip(3), 15, (np.zeros((6, 100), np.float32), RATE))
    with pytest.raises(ValueError, match="no frames"):
        lossless.write_lossless(tmp_path / "empty.nut", [], 15)
    assert not (tmp_path / "empty.nut").exists() and not list(tmp_path.glob(".*partial*"))
