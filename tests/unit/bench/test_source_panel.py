"""bench/quality/panel.py and the sources doc: the source-face panel's recipe is well formed, its
boxes follow the crop rule of the shipped colour source (checked with dlib on the media that needs
no download), and the doc gets an origin column and a summary over the colour sources. No network."""
from __future__ import annotations

import numpy as np
import pytest

from bench import section
from bench.paths import QUALITY_MEDIA, SAMPLES
from bench.quality import panel, score, sources
from swapline_core.video import iter_frames

fsm = panel._fsm()


def test_crop_box_clamps_into_the_frame_without_shrinking():
    # centred: side 1.6 x the larger extent (100), lifted by 0.125 x the height (80)
    assert fsm.crop_box((100, 100), (200, 180), 400, 400) == (70, 50, 160)
    # at the left/top edge the square shifts inside instead of shrinking
    assert fsm.crop_box((0, 10), (100, 110), 400, 400) == (0, 0, 160)
    # at the right/bottom edge too
    assert fsm.crop_box((330, 330), (390, 395), 400, 400) == (296, 296, 104)
    # a face larger than the frame: the side is capped at the frame
    assert fsm.crop_box((100, 0), (400, 300), 320, 360) == (40, 0, 320)


def test_every_recipe_entry_is_well_formed():
    names = [f.name for f in panel.PANEL]
    assert len(names) == len(set(names)) == 9
    known = {panel.VIDEO, panel.IMAGE, panel.API, panel.INSIGHTFACE}
    assert panel.VIDEO == (fsm.DIST, fsm.VERSION)   # the wheel setup already fetches
    for f in panel.PANEL:
        assert f.name[:2] in ("f_", "m_") and f.name.isidentifier(), f.name
        assert f.wheel in known, f
        assert f.member.endswith(".jpg" if f.wheel == panel.INSIGHTFACE else ".webp"), f
        assert "/" not in f.member and f.frame >= 0 and f.who, f
        x, y, side = f.box
        w, h = f.size
        assert all(isinstance(v, int) for v in (x, y, side, w, h)), f
        assert side >= 112 and x >= 0 and y >= 0 and x + side <= w and y + side <= h, f
        assert panel.crop(np.zeros((h, w, 3), np.uint8), f.box).shape == (side, side, 3)
    assert [f.name for f in panel.select("m_astronaut, f_east_asian")] == ["m_astronaut", "f_east_asian"]
    with pytest.raises(ValueError, match="unknown panel face"):
        panel.select("f_east_asian,nobody")
    with pytest.raises(ValueError, match="outside"):
        panel.crop(np.zeros((100, 120, 3), np.uint8), (30, 0, 101))


def _rule(rgb: np.ndarray, near: tuple[int, int], upsample: int) -> tuple[int, int, int]:
    """The crop rule on the dlib HOG face whose box's top-left is nearest ``near``."""
    r = min(score.hog(rgb, upsample), key=lambda r: abs(r.left() - near[0]) + abs(r.top() - near[1]))
    lm = score.landmarks(rgb, r)
    return fsm.crop_box(lm.min(0), lm.max(0), *rgb.shape[:2])


def test_shipped_colour_source_and_panel_boxes_follow_one_crop_rule():
    clip, frame, box = fsm.COLOUR_SOURCE
    path = QUALITY_MEDIA / clip
    if not path.exists():
        pytest.fail(f"{path} missing: run scripts/setup.sh (it fetches the sample clips)")
    _, rgb = next(iter_frames(path, start=frame, count=1))
    assert _rule(rgb, (29, 98), 1) == box                                   # the man: the shipped source
    woman = next(f for f in panel.PANEL if f.member == clip)
    assert woman.frame == frame and _rule(rgb, (196, 67), 1) == woman.box   # the woman beside him
    t1 = next(f for f in panel.PANEL if f.wheel == panel.INSIGHTFACE)
    _, rgb = next(iter_frames(panel.media_path(t1), start=t1.frame, count=1))
    assert rgb.shape[1::-1] == t1.size
    assert _rule(rgb, (452, 300), 0) == t1.box


def test_is_colour_tells_the_shipped_sources_apart():
    grey, colour = (np.asarray(next(iter_frames(p, count=1))[1]) for p in panel.shipped())
    assert not sources.is_colour(grey) and sources.is_colour(colour)
    assert set(panel.origins(()).keys()) == {p.resolve() for p in panel.shipped()}
    assert all(p.parent == SAMPLES for p in panel.shipped())


def test_sources_doc_has_origins_and_a_colour_summary(tmp_path, monkeypatch):
    monkeypatch.setattr(section, "DOCS", tmp_path)

    def row(moved, toward, colour, origin):
        return {"moved_to_source": moved, "toward_source": toward, "identity_distances": [0.7, 0.6, 0.8],
                "face_delta_e": 2.0, "mouth_open_corr": 0.8, "colour": colour, "origin": origin}

    rows = {"source_face": row(0.094, 0.969, False, "shipped grey"),
            "source_face_colour": row(1.0, 1.0, True, "shipped colour"),
            "f_a": row(0.0, 0.5, True, "wheel a frame 0"), "m_b": row(0.3, 0.95, True, "wheel b frame 4")}
    sources.write_doc(rows, "clip.webp")
    doc = (tmp_path / "quality_sources.md").read_text()
    assert ("Over the 3 colour sources: median moved_to_source 0.300, median toward_source 0.950; "
            "1 of 3 reach moved_to_source >= 0.9 (2 reach toward_source >= 0.9).") in doc
    assert "| origin |" in doc and "| 0.300 | 0.950 | 0.700 | 0.600 | 0.800 | 2.000 | 0.800 | wheel b frame 4 |" in doc
    assert "- Command: " in doc and "- Date: " in doc and "- Machine: " in doc and "- Commit: " in doc
