"""Build Face Model's source check (issue 49 item B) on real photos: the shipped sources and
insightface's t1.jpg pass; the same faces enlarged from a smaller photo, the generalization
bench's small source, and small faces warn with their numbers; a face too small to swap from is
refused."""
from __future__ import annotations

import functools
import logging

import cv2
import numpy as np
import pytest

from bench.generalization.devset import SMALL_FROM, small_source
from bench.quality import panel as qpanel
from devtools.media import SAMPLES, T1, insightface_image, rgb
from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
from swapline_core.backends.classical import ClassicalSwapper
from swapline_core.errors import SwaplineError
from swapline_core.faces import identity
from swapline_core.faces import source_check as sc


@functools.cache
def analyzer():
    return BuiltinAnalyzer()


@functools.cache
def t1() -> np.ndarray:
    return rgb(insightface_image(T1))


def resized(image: np.ndarray, f: float, back: bool) -> np.ndarray:
    """``image`` downscaled by ``f`` (area averaging) and, with ``back``, enlarged to its own size
    again (bicubic): what a user's enlarged small photo is."""
    h, w = image.shape[:2]
    small = cv2.resize(image, (round(w * f), round(h * f)), interpolation=cv2.INTER_AREA)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC) if back else small


def verdicts(image: np.ndarray) -> list[tuple[str, dict, str | None]]:
    """(verdict, measures, message) for every face the built-in analyzer finds in ``image``."""
    out = []
    for f in analyzer().detect([image])[0]:
        m = sc.measure(image, f)
        out.append((*sc.judge(m), m))
    return [(v, m, why) for v, why, m in out]


def m_t1_smile() -> np.ndarray:
    face = next(f for f in qpanel.PANEL if f.name == SMALL_FROM)
    return qpanel.crop(t1(), face.box)


@pytest.mark.parametrize("name", ["source_face.png", "source_face_colour.png"])
def test_the_shipped_sources_pass_cleanly(name):
    fm = identity.build_from_images(analyzer(), [rgb(SAMPLES / name)])
    check = fm.metadata["source_check"]
    assert check["status"] == "ok" and check["messages"] == [], check
    assert check["images"][0]["inter_ocular_px"] >= sc.WARN_IOD_PX
    assert check["images"][0]["detail"] >= sc.MIN_DETAIL


def test_every_face_of_t1_at_full_size_passes():
    got = verdicts(t1())
    assert len(got) == 6
    assert [v for v, _, _ in got] == ["ok"] * 6, got


def test_t1_enlarged_from_half_size_warns_on_every_face():
    """The faces keep their eye distance in pixels (36-52 px) but lose the top band."""
    got = verdicts(resized(t1(), 0.5, back=True))
    assert len(got) == 6
    for v, m, why in got:
        assert v == "warn" and m["inter_ocular_px"] >= sc.WARN_IOD_PX and m["detail_iod_px"] is None, (m, why)
        assert "looks enlarged" in why and f"{m['detail']:.4f}" in why and str(sc.MIN_DETAIL) in why


def test_the_generalization_bench_small_source_warns(caplog):
    """devset.small_source: the m_t1_smile crop with its face downscaled to ~60 px and enlarged back."""
    assert identity.build_from_images(analyzer(), [m_t1_smile()]).metadata["source_check"]["status"] == "ok"
    with caplog.at_level(logging.WARNING, logger="swapline"):
        fm = identity.build_from_images(analyzer(), [small_source(m_t1_smile())])
    check = fm.metadata["source_check"]
    assert check["status"] == "warn" and len(check["messages"]) == 1, check
    msg = check["messages"][0]
    assert "looks enlarged" in msg and "at least 32 px between the eyes" in msg
    assert f"{check['images'][0]['inter_ocular_px']:.1f} px apart" in msg
    assert msg in caplog.text                          # and in the log


def test_a_small_face_warns_with_its_size():
    got = verdicts(resized(t1(), 0.5, back=False))     # not enlarged: 18-26 px between the eyes
    assert [v for v, _, _ in got] == ["warn"] * 6, got
    v, m, why = got[0]
    assert f"its eyes are {m['inter_ocular_px']:.1f} px apart, under 32 px" in why
    assert "a sharp, frontal photo where the face is at least 32 px between the eyes" in why


def test_a_face_too_small_to_swap_from_is_refused():
    tiny = resized(t1(), 0.2, back=False)              # 8-11 px between the eyes
    assert {v for v, _, _ in verdicts(tiny)} == {"refuse"}
    with pytest.raises(SwaplineError, match=r"too small to swap from: its eyes are \d+\.\d px apart, under the 12 px"):
        identity.build_from_images(analyzer(), [tiny])


def test_a_large_face_enlarged_further_is_not_called_soft():
    """The colour source (70 px between the eyes) enlarged 3x lacks the top band at its 205 px, but
    holds it again at ~68 px, well above what a swap needs."""
    colour = rgb(SAMPLES / "source_face_colour.png")
    big = cv2.resize(colour, None, fx=3, fy=3, interpolation=cv2.INTER_CUBIC)
    [(v, m, why)] = verdicts(big)
    assert v == "ok" and m["detail"] < sc.MIN_DETAIL and 50 < m["detail_iod_px"] < 80, (m, why)


@pytest.mark.parametrize("sigma", [2.0, 3.0, 4.0])
def test_an_out_of_focus_source_warns(sigma):
    """Blurred, a face's top band is only 8-bit rounding noise; over a blurred (tiny) mid band
    that would read as detail without the noise floor."""
    colour = cv2.GaussianBlur(rgb(SAMPLES / "source_face_colour.png"), (0, 0), sigma)
    [(v, m, why)] = verdicts(colour)
    assert v == "warn" and m["detail_iod_px"] is None and m["top_band_rms"] < sc.MIN_TOP_RMS, (m, why)
    assert "out of focus" in why


def test_each_photo_of_a_face_model_is_checked_and_named():
    hanks = rgb(SAMPLES / "source_face.png")
    fm = identity.build_from_images(analyzer(), [hanks, small_source(m_t1_smile())])
    check = fm.metadata["source_check"]
    assert check["status"] == "warn" and [i["verdict"] for i in check["images"]] == ["ok", "warn"]
    assert check["messages"][0].startswith("source image 1: ")


def test_the_check_travels_with_a_saved_face_model(tmp_path):
    fm = identity.build_from_images(analyzer(), [small_source(m_t1_smile())])
    path = str(tmp_path / "small.safetensors")
    identity.save(fm, path)
    assert identity.load(path).metadata["source_check"] == fm.metadata["source_check"]


def test_the_refusal_size_is_the_builtin_swappers_own_minimum():
    assert sc.REFUSE_IOD_PX == ClassicalSwapper.competence.min_inter_ocular_px


def test_the_video_swap_report_carries_the_warning(tmp_path):
    from swapline_core.video import stages
    from swapline_core.video.frames import FrameSequence

    seq = FrameSequence.open(str(SAMPLES / "kling_avatar_clip.mp4"), count=2, chunk=2)
    faces, _ = stages.track_faces(seq, analyzer(), str(tmp_path), stages.Hooks(), mode="largest")
    for image, warned in ((small_source(m_t1_smile()), True), (rgb(SAMPLES / "source_face.png"), False)):
        fm = identity.build_from_images(analyzer(), [image])
        _, report = stages.swap_frames(seq, faces, fm, ClassicalSwapper(), analyzer(), str(tmp_path), stages.Hooks())
        assert report.extra.get("source_warnings", []) == (fm.metadata["source_check"]["messages"] if warned else [])
        assert bool(report.extra.get("source_warnings")) == warned
