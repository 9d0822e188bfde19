"""bench/farm.py without running a farm: a missing coordinator stops the section with a message
that says what is missing and how to skip it; the benchmark clips differ from each other."""
from __future__ import annotations

import sys

import pytest

from bench import farm


def test_missing_coordinator_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "swapline_farm.coordinator", None)     # import of it raises ImportError
    with pytest.raises(RuntimeError, match="coordinator is not importable") as err:
        farm.import_farm()
    assert "--skip-farm" in str(err.value) and "farm" in str(err.value)


def test_variant_clips_are_distinct_and_keep_their_frames(tmp_path):
    from swapline_core.video.read import probe

    clips = farm.variant_clips(2, 4, tmp_path)
    infos = [probe(c) for c in clips]
    assert [i.frame_count for i in infos] == [4, 4]
    assert infos[0].content_key != infos[1].content_key
