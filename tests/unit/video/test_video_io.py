from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

import hashlib  # noqa: E402
import time  # noqa: E402
from fractions import Fraction  # noqa: E402

import av  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from devtools.test_media import BITS, CELL, NTSC, make_animation, make_video, read_stamp, stamp  # noqa: E402,F401
from swapline_core import video as vio  # noqa: E402


def audio_onset(path, threshold=0.3) -> float:
    """Seconds (output clock) of the first sample louder than ``threshold``."""
    with av.open(str(path)) as c:
        s = c.streams.audio[0]
        for fr in c.decode(s):
            x = np.abs(fr.to_ndarray()).max(axis=0)
            hit = np.nonzero(x > threshold)[0]
            if hit.size:
                return float(fr.pts * fr.time_base) + hit[0] / fr.sample_rate
    raise AssertionError("no loud audio found")


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    d = tmp_path_factory.mktemp("media")
    m = {
        "mp4": make_video(d / "clip.mp4", n=60, acodec="aac"),
        "webm": make_video(d / "clip.webm", n=40, vcodec="libvpx-vp9", rate=25,
                           vopts={"deadline": "realtime", "cpu-used": "8"}),
        "mkv": make_video(d / "clip.mkv", n=36, rate=24),
        # yuv420p cannot hold odd sizes; 4:4:4 H.264 can, as phones and editors sometimes write.
        "odd": make_video(d / "odd.mp4", n=10, w=321, h=241, rate=30, pix_fmt="yuv444p"),
        "gif": make_animation(d / "anim.gif", n=12, durations=100),
        "webp": make_animation(d / "anim.webp", n=10, w=129, h=97, durations=40),
    }
    # A variable-rate clip: frame gaps alternate 1/60 s and 4/60 s.
    pts, t = [], 0
    for i in range(48):
        pts.append(t)
        t += 1 if i % 2 else 4
    m["vfr"] = make_video(d / "vfr.mp4", n=48, rate=None, pts=pts, time_base=Fraction(1, 60))
    folder = d / "frames"
    folder.mkdir()
    for i in range(12):  # names sort wrongly as plain strings: 1, 10, 11, 2, ...
        Image.fromarray(stamp(i, 160, 96)).save(folder / f"frame_{i + 1}.png")
    m["folder"] = folder
    Image.fromarray(stamp(5, 160, 96)).save(d / "still.jpg", quality=95)
    m["still"] = d / "still.jpg"
    return m


# ------------------------------------------------------------------------------- probing


def test_probe_mp4_with_audio(media):
    info = vio.probe(media["mp4"])
    assert (info.kind, info.width, info.height, info.frame_count) == ("video", 160, 120, 60)
    assert info.fps_fraction == NTSC and info.fps == pytest.approx(29.97, abs=0.01)
    assert not info.variable_fps
    assert info.duration == pytest.approx(60 / float(NTSC), abs=1e-3)
    assert info.has_audio and info.audio_codec == "aac"
    assert info.audio_duration == pytest.approx(info.duration, abs=0.05)
    assert info.content_key == hashlib.sha256(media["mp4"].read_bytes()).hexdigest()
    assert info.codec == "h264"


@pytest.mark.parametrize("name,kind,size,count,fps", [
    ("webm", "video", (160, 120), 40, 25),
    ("mkv", "video", (160, 120), 36, 24),
    ("odd", "video", (321, 241), 10, 30),
    ("gif", "animated_image", (67, 51), 12, 10),
    ("webp", "animated_image", (129, 97), 10, 25),
    ("folder", "image_folder", (160, 96), 12, 24),
    ("still", "image", (160, 96), 1, 24),
])
def test_probe_kinds(media, name, kind, size, count, fps):
    info = vio.probe(media[name])
    assert info.kind == kind
    assert (info.width, info.height) == size
    assert info.frame_count == count
    assert info.fps_fraction == fps
    assert not info.has_audio and info.audio_codec is None
    frames = list(vio.iter_frames(media[name]))
    assert [i for i, _ in frames] == list(range(count))
    assert all(f.shape == (size[1], size[0], 3) and f.dtype == np.uint8 for _, f in frames)


def test_webm_header_has_no_count_but_probe_counts(media):
    with av.open(str(media["webm"])) as c:
        assert c.streams.video[0].frames == 0          # Matroska/WebM headers hold no count
    assert vio.probe(media["webm"]).frame_count == 40


def test_folder_natural_order_and_content_key(media, tmp_path):
    got = [read_stamp(f) for _, f in vio.iter_frames(media["folder"])]
    assert got == list(range(12))
    key = vio.probe(media["folder"]).content_key
    Image.fromarray(stamp(7, 160, 96)).save(media["folder"] / "frame_13.png")
    try:
        info = vio.probe(media["folder"])
        assert info.frame_count == 13 and info.content_key != key
    finally:
        (media["folder"] / "frame_13.png").unlink()


def test_variable_frame_rate(media):
    info = vio.probe(media["vfr"])
    assert info.variable_fps
    assert info.frame_count == 48
    # 47 gaps averaging 2.5/60 s -> 24 fps
    assert info.fps == pytest.approx(24.0, rel=0.02)
    assert [read_stamp(f) for _, f in vio.iter_frames(info.path)] == list(range(48))
    assert vio.frame_time(info.path, 2) == pytest.approx(5 / 60, abs=1e-3)
    for name in ("mp4", "webm", "mkv", "gif"):
        assert not vio.probe(media[name]).variable_fps, name


def test_display_rotation_is_applied(tmp_path):
    p = make_video(tmp_path / "portrait.mp4", n=4, w=160, h=96, rate=30, rotation=90)
    info = vio.probe(p)
    assert (info.width, info.height, info.rotation) == (96, 160, 90)
    frame = vio.read_frames(p, [1])[0]
    assert frame.shape == (160, 96, 3)
    assert read_stamp(np.rot90(frame, k=-1)) == 1       # undoing the rotation finds the stamp


def test_probe_cache_tracks_file_changes(media, tmp_path):
    p = tmp_path / "c.mp4"
    p.write_bytes(media["mkv"].read_bytes())
    t = time.perf_counter()
    a = vio.probe(p)
    first = time.perf_counter() - t
    t = time.perf_counter()
    assert vio.probe(p) is a
    assert time.perf_counter() - t < max(first / 5, 0.005)
    make_video(p, n=5, fmt="matroska")
    assert vio.probe(p).frame_count == 5


# ------------------------------------------------------------------------------- reading


@pytest.mark.parametrize("name", ["mp4", "webm", "mkv", "gif", "webp", "folder"])
def test_start_count_stride(media, name):
    got = [(i, read_stamp(f)) for i, f in vio.iter_frames(media[name], start=3, count=4, stride=2)]
    assert got == [(3, 3), (5, 5), (7, 7), (9, 9)]
    tail = [i for i, _ in vio.iter_frames(media[name], start=8)]
    assert tail == list(range(8, vio.probe(media[name]).frame_count))
    assert list(vio.iter_frames(media[name], count=0)) == []


def test_seek_deep_into_long_gop(tmp_path):
    # Keyframes every 250 frames: reaching frame 200 means a seek plus decoding forward.
    p = make_video(tmp_path / "gop.mp4", n=240, w=160, h=64, rate=30, vopts={"g": "250"})
    assert [read_stamp(f) for _, f in vio.iter_frames(p, start=200, count=3)] == [200, 201, 202]
    order = [230, 5, 120, 5, 121]
    assert [read_stamp(f) for f in vio.read_frames(p, order)] == order


def test_read_frames_random_order(media):
    for name in ("mp4", "webm", "gif", "folder"):
        order = [9, 2, 9, 0]
        assert [read_stamp(f) for f in vio.read_frames(media[name], order)] == order, name


def test_iter_chunks(media):
    chunks = list(vio.iter_chunks(media["mkv"], chunk=16))
    assert [len(c) for c in chunks] == [16, 16, 4]
    assert [i for c in chunks for i, _ in c] == list(range(36))


def test_bad_arguments(media):
    with pytest.raises(IndexError, match="frame 60 is outside clip.mp4"):
        list(vio.iter_frames(media["mp4"], start=60))
    with pytest.raises(ValueError, match="stride"):
        list(vio.iter_frames(media["mp4"], stride=0))
    with pytest.raises(IndexError):
        vio.read_frames(media["mp4"], [1, 99])


def test_iterating_600_frames_keeps_memory_flat(tmp_path):
    import psutil  # a ComfyUI requirement: never missing where the tests run

    p = make_video(tmp_path / "long.mp4", n=600, w=640, h=360, rate=30,
                   vopts={"preset": "ultrafast"})
    proc = psutil.Process()
    vio.probe(p)
    base = proc.memory_info().rss
    peak = base
    t = time.perf_counter()
    n = 0
    for i, _frame in vio.iter_frames(p):
        n += 1
        if i % 25 == 0:
            peak = max(peak, proc.memory_info().rss)
    dt = time.perf_counter() - t
    growth_mb = (peak - base) / 2**20
    print(f"\ndecode 640x360: {n / dt:.0f} fps, RSS growth {growth_mb:.1f} MB")
    assert n == 600
    assert growth_mb < 150      # the whole clip as RGB would be 395 MB

    # Re-encoding the clip: after the encoder's warm-up (lookahead buffers) RSS stays flat.
    rss = {}
    with vio.VideoWriter(tmp_path / "copy.mp4", fps=30, preset="ultrafast") as w:
        for i, frame in vio.iter_frames(p):
            w.write(frame)
            if i in (100, 599):
                rss[i] = proc.memory_info().rss
    assert (rss[599] - rss[100]) / 2**20 < 30
    assert vio.probe(tmp_path / "copy.mp4").frame_count == 600


# ------------------------------------------------------------------------------- errors


def test_missing_file_is_named(tmp_path):
    with pytest.raises(vio.MissingMediaError, match="nowhere.mp4: file not found"):
        vio.probe(tmp_path / "nowhere.mp4")
    with pytest.raises(FileNotFoundError):
        list(vio.iter_frames(tmp_path / "nowhere.mp4"))


def test_zero_byte_file(tmp_path):
    p = tmp_path / "empty.mp4"
    p.touch()
    with pytest.raises(vio.VideoReadError, match="empty.mp4: file is empty") as e:
        vio.probe(p)
    assert e.value.frames_readable == 0


def test_truncated_mp4_without_index(media, tmp_path):
    # PyAV writes the moov index last: cutting the file in half loses it.
    data = media["mp4"].read_bytes()
    p = tmp_path / "half.mp4"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(vio.VideoReadError, match="half.mp4: not a readable video") as e:
        vio.probe(p)
    assert e.value.frames_readable == 0


def test_truncated_mp4_with_index_reports_readable_frames(tmp_path):
    full = make_video(tmp_path / "fs.mp4", n=120, w=320, h=240, rate=30,
                      options={"movflags": "faststart"})
    data = full.read_bytes()
    p = tmp_path / "cut.mp4"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(vio.VideoReadError, match=r"cut.mp4: truncated or corrupt.*lists 120 frames") as e:
        vio.probe(p)
    assert 0 < e.value.frames_readable < 120
    assert f"{e.value.frames_readable} frames readable" in str(e.value)


def test_garbage_and_empty_containers(tmp_path):
    junk = tmp_path / "junk.mkv"
    junk.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(vio.VideoReadError, match="junk.mkv"):
        vio.probe(junk)
    # A video stream that never received a frame.
    c = av.open(str(tmp_path / "noframes.mp4"), "w")
    vs = c.add_stream("libx264", rate=30)
    vs.width, vs.height, vs.pix_fmt = 64, 64, "yuv420p"
    c.start_encoding()                          # writes the header; no packet follows
    c.close()
    with pytest.raises(vio.VideoReadError, match="noframes.mp4: contains no video frames"):
        vio.probe(tmp_path / "noframes.mp4")
    (tmp_path / "nothing").mkdir()
    with pytest.raises(vio.VideoReadError, match="nothing: folder holds no images"):
        vio.probe(tmp_path / "nothing")
    bad_gif = tmp_path / "bad.gif"
    bad_gif.write_bytes(b"GIF89a" + b"\x00" * 20)
    with pytest.raises(vio.VideoReadError, match="bad.gif"):
        vio.probe(bad_gif)


def test_folder_with_mismatched_frame_sizes(tmp_path):
    d = tmp_path / "mixed"
    d.mkdir()
    Image.fromarray(stamp(0, 160, 96)).save(d / "001.png")
    Image.fromarray(stamp(1, 128, 96)).save(d / "002.png")
    with pytest.raises(vio.VideoReadError, match="002.png: frame 1 is 128x96") as e:
        list(vio.iter_frames(d))
    assert e.value.frames_readable == 1


# ------------------------------------------------------------------------------- writing


def test_writer_round_trip_with_copied_audio(media, tmp_path):
    src = vio.probe(media["mp4"])
    out = tmp_path / "out.mp4"
    with vio.VideoWriter(out, fps=src.fps_fraction, crf=28, preset="ultrafast") as w:
        assert w.add_audio_from(src.path)
        for _, f in vio.iter_frames(src.path):
            w.write(f)
    assert w.audio_mode == "copy" and w.frames_written == 60
    info = vio.probe(out)
    assert info.frame_count == 60
    assert info.fps_fraction == NTSC
    assert info.has_audio and info.audio_codec == "aac"
    assert abs(info.audio_duration - info.duration) < 0.1
    assert [read_stamp(f) for _, f in vio.iter_frames(out)] == list(range(60))
    assert not list(tmp_path.glob(".*partial*"))


@pytest.mark.parametrize("acodec,fmt,mode", [("aac", "mp4", "copy"), ("pcm_s16le", "mov", "aac"),
                                            ("libopus", "matroska", "aac"),
                                            ("libmp3lame", "matroska", "copy")])
def test_writer_subrange_keeps_audio_in_sync(tmp_path, acodec, fmt, mode):
    # Loud burst at 2.0 s; writing frames 30..59 (1.0-2.0 s at 30 fps) plus 15 more puts it at 1.0 s.
    src = make_video(tmp_path / f"src.{ {'matroska': 'mkv'}.get(fmt, fmt) }", n=90, w=128, h=64,
                     rate=30, acodec=acodec, burst_at=2.0, fmt=fmt)
    out = tmp_path / "part.mp4"
    with vio.VideoWriter(out, fps=30, preset="ultrafast") as w:
        assert w.add_audio_from(src, start_frame=30)
        for _, f in vio.iter_frames(src, start=30, count=45):
            w.write(f)
    assert w.audio_mode == mode
    info = vio.probe(out)
    assert info.frame_count == 45 and info.duration == pytest.approx(1.5, abs=1e-6)
    assert info.audio_codec in ("aac", "mp3")
    assert abs(info.audio_duration - 1.5) < 0.1
    assert audio_onset(out) == pytest.approx(1.0, abs=0.03)


def test_writer_without_audio_source(media, tmp_path):
    out = tmp_path / "silent.mp4"
    with vio.VideoWriter(out, fps=25) as w:
        assert not w.add_audio_from(media["webm"])
        assert not w.add_audio_from(media["gif"])
        for _, f in vio.iter_frames(media["webm"], count=5):
            w.write(f)
    info = vio.probe(out)
    assert (info.frame_count, info.has_audio, info.fps_fraction) == (5, False, 25)


def test_writer_pads_odd_sizes(media, tmp_path):
    out = tmp_path / "odd_out.mp4"
    frames = [f for _, f in vio.iter_frames(media["odd"])]
    with vio.VideoWriter(out, fps=30, crf=12) as w:
        for f in frames:
            w.write(f)
    assert w.padded == (1, 1) and (w.width, w.height) == (321, 241)
    info = vio.probe(out)
    assert (info.width, info.height, info.frame_count) == (322, 242, 10)
    back = vio.read_frames(out, [4])[0]
    assert np.abs(back[:241, :321].astype(int) - frames[4]).mean() < 3
    # the padding repeats the edge column/row
    assert np.abs(back[:241, 321].astype(int) - back[:241, 320]).mean() < 3


def test_writer_fps_from_float_and_crf_changes_size(media, tmp_path):
    sizes = {}
    for crf in (12, 40):
        out = tmp_path / f"crf{crf}.mp4"
        with vio.VideoWriter(out, fps=29.97, crf=crf, preset="veryfast") as w:
            for _, f in vio.iter_frames(media["mkv"]):
                w.write(f)
        sizes[crf] = out.stat().st_size
        assert vio.probe(out).fps_fraction == NTSC
    assert sizes[40] < sizes[12]


def test_writer_rejects_bad_input(media, tmp_path):
    with pytest.raises(ValueError, match="crf"):
        vio.VideoWriter(tmp_path / "a.mp4", fps=30, crf=99)
    with pytest.raises(ValueError, match="output must end in"):
        vio.VideoWriter(tmp_path / "a.avi", fps=30)
    w = vio.VideoWriter(tmp_path / "b.mp4", fps=30, preset="not-a-preset")
    with pytest.raises(ValueError, match="rejected the settings"):
        w.write(stamp(0, 64, 64))
    w.abort()
    with pytest.raises(ValueError, match="no frames were written"):
        with vio.VideoWriter(tmp_path / "c.mp4", fps=30):
            pass
    with pytest.raises(RuntimeError, match="boom"):
        with vio.VideoWriter(tmp_path / "d.mp4", fps=30) as w:
            w.write(stamp(0, 64, 64))
            with pytest.raises(ValueError, match="frame 1 is 32x64"):
                w.write(stamp(1, 32, 64))
            with pytest.raises(TypeError):
                w.write(np.zeros((64, 64, 3), np.float32))
            with pytest.raises(RuntimeError, match="before the first write"):
                w.add_audio_from(media["mp4"])
            raise RuntimeError("boom")
    assert not any(tmp_path.iterdir())       # nothing half-written is left behind


def test_writer_audio_only_source(tmp_path):
    wav = tmp_path / "tone.wav"
    c = av.open(str(wav), "w")
    a = c.add_stream("pcm_s16le", rate=22050)
    a.layout = "mono"
    x = (0.3 * 32767 * np.sin(np.arange(22050 * 3) * 2 * np.pi * 440 / 22050)).astype(np.int16)
    fr = av.AudioFrame.from_ndarray(x[None, :], format="s16", layout="mono")
    fr.sample_rate, fr.pts = 22050, 0
    for p in a.encode(fr):
        c.mux(p)
    for p in a.encode():
        c.mux(p)
    c.close()
    out = tmp_path / "with_tone.mp4"
    with vio.VideoWriter(out, fps=10) as w:
        assert w.add_audio_from(wav, start_time=0.5)
        for i in range(20):
            w.write(stamp(i, 64, 32))
    info = vio.probe(out)
    assert info.audio_codec == "aac" and info.audio_duration == pytest.approx(2.0, abs=0.05)


def test_write_image_round_trip(tmp_path):
    img = stamp(3, 65, 33)
    png = vio.write_image(tmp_path / "x.png", img)
    assert np.array_equal(np.asarray(Image.open(png)), img)
    jpg = vio.write_image(tmp_path / "sub" / "x.jpg", img)
    assert read_stamp(np.asarray(Image.open(jpg).convert("RGB"))) == 3
    with pytest.raises(ValueError):
        vio.write_image(tmp_path / "x.gif", img)


def test_encode_speed_640x360(tmp_path):
    frames = [stamp(i, 640, 360) for i in range(8)]
    out = tmp_path / "speed.mp4"
    t = time.perf_counter()
    with vio.VideoWriter(out, fps=30, preset="veryfast", crf=23) as w:
        for i in range(120):
            w.write(frames[i % 8])
    dt = time.perf_counter() - t
    print(f"\nencode 640x360 veryfast: {120 / dt:.0f} fps")
    assert vio.probe(out).frame_count == 120


# ------------------------------------------------------------------------ real sample media

SAMPLES = ROOT / "assets" / "samples"
CACHE = ROOT / "tests" / ".cache" / "media"


def test_shipped_sample_clip():
    clip = SAMPLES / "kling_avatar_clip.mp4"
    if not clip.exists():
        pytest.fail(f"{clip} missing: assets/samples is committed (rebuild: fetch_sample_media.py --make-assets)")
    info = vio.probe(clip)
    assert (info.kind, info.width, info.height, info.frame_count) == ("video", 350, 350, 48)
    assert info.fps_fraction == 15 and info.codec == "h264"
    assert info.has_audio and info.audio_codec == "aac"
    assert abs(info.audio_duration - info.duration) < 0.1
    face = vio.probe(SAMPLES / "source_face.png")
    assert face.kind == "image"
    total = sum(p.stat().st_size for p in SAMPLES.iterdir())
    assert total < 1_000_000


@pytest.mark.parametrize("name,count", [("api_kling_avatar2-1.webp", 56),
                                        ("video_wan2_1_infinitetalk-1.webp", 45)])
def test_real_animated_webp(name, count):
    p = CACHE / name
    if not p.exists():
        pytest.fail(f"{p} missing: run scripts/setup.sh (it fetches the sample clips into tests/.cache/media)")
    info = vio.probe(p)
    assert (info.kind, info.width, info.height, info.frame_count) == ("animated_image", 350, 350, count)
    assert info.fps_fraction == 15 and not info.variable_fps
    last = vio.read_frames(p, [count - 1])[0]
    assert last.shape == (350, 350, 3) and last.std() > 10


def test_writer_is_reproducible(tmp_path):
    """Identical frames give a byte-identical MP4: what lets a resumed job match an uninterrupted one."""
    rng = np.random.default_rng(7)
    base = rng.integers(0, 255, (90, 120, 3), dtype=np.uint8)
    frames = [np.roll(base, 3 * i, axis=1) for i in range(24)]
    outs = []
    for k in range(3):
        path = tmp_path / f"r{k}.mp4"
        with vio.VideoWriter(path, fps=24, crf=18, preset="medium") as w:
            for f in frames:
                w.write(f)
        outs.append(path.read_bytes())
    assert outs[0] == outs[1] == outs[2]


def test_source_faces_match_their_recipes(tmp_path):
    """The colour candidate is a colour crop and exactly what
    fetch_sample_media.py --make-assets rebuilds (a fixed box of a fixed frame)."""
    import importlib.util

    p = SAMPLES / "source_face_colour.png"
    if not p.exists():
        pytest.fail(f"{p} missing: assets/samples is committed (rebuild: fetch_sample_media.py --make-assets)")
    face = vio.read_frames(p, [0])[0]
    assert face.shape == (246, 246, 3)
    assert np.abs(face[..., 0].astype(int) - face[..., 2].astype(int)).mean() > 5   # not greyscale
    spec = importlib.util.spec_from_file_location("fetch_sample_media", ROOT / "scripts" / "fetch_sample_media.py")
    fsm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fsm)
    if not (CACHE / fsm.COLOUR_SOURCE[0]).exists():
        pytest.fail(f"{CACHE / fsm.COLOUR_SOURCE[0]} missing: run scripts/setup.sh (it fetches the sample clips)")
    rebuilt = vio.read_frames(fsm.make_colour_source(CACHE, tmp_path), [0])[0]
    assert np.array_equal(rebuilt, face)
    # the demo's source photo, from its recipe too
    woman = vio.read_frames(SAMPLES / "source_face_woman.png", [0])[0]
    if not (CACHE / fsm.WOMAN_SOURCE[0]).exists():
        pytest.fail(f"{CACHE / fsm.WOMAN_SOURCE[0]} missing: run scripts/setup.sh (it fetches the sample clips)")
    assert np.array_equal(vio.read_frames(fsm.make_woman_source(CACHE, tmp_path), [0])[0], woman)
