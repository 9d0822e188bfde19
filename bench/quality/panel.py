"""A fixed panel of extra source faces for ``bench.quality.sources --panel``.

Identity on the speech case depends strongly on the source face, so one or two sources say little.
The panel is nine faces cropped from frames of MIT-licensed ComfyUI workflow-template wheels (PyPI)
and insightface's bundled t1.jpg, each by a fixed box: the rule of scripts/fetch_sample_media.py's
``crop_box`` (the shipped colour source's rule) applied once to the face's dlib 68 points, so
rebuilding needs no dlib. The wheels are downloaded (never installed) by that script's ``fetch``
into tests/.cache/media/panel/ on first use; the crops go to out/bench/sources/panel/. Neither is
committed, and setup.sh does not fetch the panel.
"""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..paths import OUT, QUALITY_MEDIA, REPO, SAMPLES

CACHE = QUALITY_MEDIA / "panel"
CROPS = OUT / "sources" / "panel"
VIDEO = ("comfyui-workflow-templates-media-video", "0.3.101")
IMAGE = ("comfyui-workflow-templates-media-image", "0.3.160")
API = ("comfyui-workflow-templates-media-api", "0.3.84")
INSIGHTFACE = ("insightface", None)   # the installed package's data/images, not a download


@dataclass(frozen=True)
class Face:
    name: str                      # f_/m_ prefix: female/male; also the row name in the doc
    wheel: tuple[str, str | None]  # (distribution, version)
    member: str                    # file under the wheel's templates/ (or insightface's data/images/)
    frame: int
    box: tuple[int, int, int]      # (x, y, side) in that frame
    size: tuple[int, int]          # (width, height) of the frame, checked when cropping
    who: str


PANEL = (
    Face("f_kling_dual_woman", VIDEO, "api_kling_dual_characters_effects-1.webp", 0, (153, 35, 197), (350, 350),
         "pale blonde woman, head turned (beside the colour source's man)"),
    Face("f_blonde_smile", VIDEO, "video_wan2_2_14B_t2v-1.webp", 0, (69, 41, 224), (350, 350), "blonde woman, smiling"),
    Face("f_east_asian", IMAGE, "flux_fill_inpaint_example-1.webp", 0, (288, 102, 387), (1024, 1024),
         "East Asian woman, dark hair"),
    Face("f_nordic_blonde", IMAGE, "flux1_krea_dev-1.webp", 0, (68, 42, 246), (400, 400),
         "pale woman, straight blonde hair"),
    Face("f_curly_light", IMAGE, "image_hidream_o1-1.webp", 0, (108, 47, 194), (400, 400), "woman, light curly hair"),
    Face("f_brunette_olive", IMAGE, "image_z_image_turbo-1.webp", 0, (89, 99, 229), (400, 400),
         "olive-skinned woman, dark curly hair"),
    Face("m_astronaut", VIDEO, "api_grok_video-1.webp", 44, (68, 41, 211), (350, 350), "man in a space helmet"),
    Face("m_t1_smile", INSIGHTFACE, "t1.jpg", 0, (428, 254, 182), (1280, 886),
         "dark-haired man, smiling (group photo)"),
    Face("m_older_suit", API, "api_runway_gen4_turo_image_to_video-1.webp", 84, (167, 72, 147), (350, 350),
         "older balding man in a suit"),
)


def _fsm():
    """scripts/fetch_sample_media.py as a module (scripts/ is not a package)."""
    if "fetch_sample_media" not in sys.modules:
        spec = importlib.util.spec_from_file_location("fetch_sample_media",
                                                      REPO / "scripts" / "fetch_sample_media.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        sys.modules["fetch_sample_media"] = mod
    return sys.modules["fetch_sample_media"]


def select(only: str | None) -> tuple[Face, ...]:
    """The panel, or the comma-separated names in ``only`` (unknown names are an error)."""
    if not only:
        return PANEL
    names = [n.strip() for n in only.split(",") if n.strip()]
    known = {f.name: f for f in PANEL}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown panel face(s) {unknown}; the panel: {sorted(known)}")
    return tuple(known[n] for n in names)


def media_path(face: Face, cache: Path = CACHE) -> Path:
    if face.wheel == INSIGHTFACE:
        spec = importlib.util.find_spec("insightface")
        if spec is None or spec.origin is None:
            raise FileNotFoundError("insightface is not installed; it carries t1.jpg")
        return Path(spec.origin).parent / "data" / "images" / face.member
    return cache / face.member


def fetch(faces=PANEL, cache: Path = CACHE) -> None:
    """Download what the faces need, one wheel at a time; files already in cache are kept."""
    wheels: dict[tuple[str, str], list[str]] = {}
    for f in faces:
        if f.wheel != INSIGHTFACE:
            wheels.setdefault(f.wheel, []).append(f"templates/{f.member}")
    for (dist, version), members in wheels.items():
        _fsm().fetch(cache, members=tuple(members), dist=dist, version=version)


def crop(rgb: np.ndarray, box: tuple[int, int, int]) -> np.ndarray:
    """The recipe's square; a box outside the frame means the recipe no longer fits its media."""
    x, y, side = box
    h, w = rgb.shape[:2]
    if side < 1 or x < 0 or y < 0 or x + side > w or y + side > h:
        raise ValueError(f"crop box {box} is outside the {w}x{h} frame")
    return np.ascontiguousarray(rgb[y:y + side, x:x + side])


def build(faces=PANEL, cache: Path = CACHE, out: Path = CROPS) -> list[Path]:
    """Fetch, crop and write each face to out/<name>.png; returns the paths."""
    from PIL import Image

    from swapline_core.video import iter_frames

    fetch(faces, cache)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in faces:
        _, rgb = next(iter_frames(media_path(f, cache), start=f.frame, count=1))
        if rgb.shape[1::-1] != f.size:
            raise ValueError(f"{f.name}: frame is {rgb.shape[1]}x{rgb.shape[0]}, the recipe expects "
                             f"{f.size[0]}x{f.size[1]} (another version of the media?)")
        paths.append(out / f"{f.name}.png")
        Image.fromarray(crop(rgb, f.box)).save(paths[-1])
    return paths


def origin(face: Face) -> str:
    dist, version = face.wheel
    where = f"insightface data/images/{face.member}" if face.wheel == INSIGHTFACE else \
        f"{dist.removeprefix('comfyui-workflow-templates-')} {version} `{face.member}`"
    return f"{face.who}: {where} frame {face.frame}, box (x, y, side) {face.box}"


def shipped() -> list[Path]:
    return [SAMPLES / "source_face.png", SAMPLES / "source_face_colour.png"]


def origins(faces=PANEL, out: Path = CROPS) -> dict[Path, str]:
    """Doc origin text per resolved source path: the two shipped sources and the faces' crops."""
    name, frame, box = _fsm().COLOUR_SOURCE
    grey, colour = shipped()
    return {grey.resolve(): "shipped `assets/samples/source_face.png` (insightface Tom_Hanks_54745.png, greyscale)",
            colour.resolve(): (f"shipped `assets/samples/source_face_colour.png`: the man, "
                               f"{VIDEO[0].removeprefix('comfyui-workflow-templates-')} {VIDEO[1]} `{name}` "
                               f"frame {frame}, box (x, y, side) {box}"),
            **{(out / f"{f.name}.png").resolve(): origin(f) for f in faces}}
