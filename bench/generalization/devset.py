"""The fixed development set of issue 30: the clips the project is tuned on, crossed with sources.

Keep this set fixed so runs compare. The clips are members of the MIT wheel
``comfyui-workflow-templates-media-video`` 0.3.101 (PyPI), fetched on first use by
scripts/fetch_sample_media.py's ``fetch`` (downloaded, never installed) into
tests/.cache/media/devset/; the three quality clips are the ones setup already fetches into
tests/.cache/media/. Only the clips named here may be fetched or looked at: the wheel's other clips
are kept for independent checks (issue 30).

Sources: both shipped photos, three faces of the quality bench's panel (bench/quality/panel.py
crops them) and a small source made from one of them by a fixed recipe (``small_source``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..paths import OUT, QUALITY_MEDIA
from ..quality import panel as qpanel

CACHE = QUALITY_MEDIA / "devset"
SOURCES_DIR = OUT / "generalization" / "sources"


@dataclass(frozen=True)
class Clip:
    name: str       # the template's base name (templates/<name>.webp)
    shows: str
    quality: bool = False   # one of the quality bench's clips (already in tests/.cache/media/)
    folder: Path | None = None   # where the clip's file lives when not in the development set's cache

    @property
    def member(self) -> str:
        return f"templates/{self.name}.webp"

    def path(self) -> Path:
        return (self.folder or (QUALITY_MEDIA if self.quality else CACHE)) / f"{self.name}.webp"


CLIPS = (
    Clip("api_happyhorse1_1_t2v-1", "flower crown, frontal"),
    Clip("api_kling_o3_video_edit-1", "a bird held against the face"),
    Clip("api_luma_ray3_2_video_edit-1", "several people, guitar"),
    Clip("video_wan2_2_14B_flf2v-1", "helmet visor, beard"),
    Clip("video_wan_vace_14B_v2v-1", "dancer, hair across the face"),
    Clip("api_kling_motion_control3-2", "low light, three-quarter view"),
    Clip("api_google_gemini_omni_flash_t2v-1", "two small faces"),
    Clip("api_happyhorse1_1_i2v-1", "eyes closed, cheek pressed to fur"),
    Clip("api_kling_avatar2-1", "talking head, red-framed glasses (the sample clip; a quality-bench clip)", True),
    Clip("video_wan2_1_infinitetalk-1", "two people talking, three-quarter views, glasses (a quality-bench clip)",
         True),
    Clip("video_ltx2_3_i2v-1", "talking face without glasses, ~80 px (a quality-bench clip)", True),
)

# Panel faces used as sources (bench/quality/panel.py names). All three come from the video wheel
# or insightface, so no image/API wheel is downloaded for this section.
PANEL_SOURCES = ("f_blonde_smile", "m_astronaut", "m_t1_smile")
# The small source (issue 30: "a 60-100 px face upscaled"): the group-photo face m_t1_smile, its
# 182 px crop downscaled to SMALL_SIDE (the face, ~1/1.6 of the crop, then ~60 px) with area
# averaging and upscaled back to the crop's side with bicubic interpolation, as a user's
# enlarged small photo would be.
SMALL_FROM, SMALL_SIDE = "m_t1_smile", 96


def small_source(rgb: np.ndarray, side: int = SMALL_SIDE) -> np.ndarray:
    import cv2

    h, w = rgb.shape[:2]
    small = cv2.resize(rgb, (side, side * h // w), interpolation=cv2.INTER_AREA)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)


def fetch_clips(clips=CLIPS, cache: Path = CACHE) -> list[Path]:
    """The clips' files, downloading the wheel once for the ones missing (quality clips: setup's)."""
    missing = [c for c in clips if not c.quality]
    if missing:
        qpanel._fsm().fetch(cache, members=tuple(c.member for c in missing))
    paths = [c.path() for c in clips]
    absent = [str(p) for p in paths if not p.is_file()]
    if absent:
        raise FileNotFoundError(f"development-set clips missing: {absent}; the quality clips come from "
                                "scripts/fetch_sample_media.py (scripts/setup.sh runs it)")
    return paths


@dataclass(frozen=True)
class Source:
    name: str
    path: Path
    origin: str


def shipped_sources() -> list[Source]:
    """The two photos shipped in assets/samples/ (no download)."""
    grey, colour = qpanel.shipped()
    origins = qpanel.origins(())
    return [Source("shipped_grey", grey, origins[grey.resolve()]),
            Source("shipped_colour", colour, origins[colour.resolve()])]


def build_sources(out: Path = SOURCES_DIR) -> list[Source]:
    """The sources as files: the shipped photos, the panel crops and the small source."""
    from PIL import Image

    faces = qpanel.select(",".join(PANEL_SOURCES))
    crops = qpanel.build(faces)
    origins = qpanel.origins(faces)
    srcs = shipped_sources()
    srcs += [Source(f.name, p, origins[p.resolve()]) for f, p in zip(faces, crops)]
    base = crops[PANEL_SOURCES.index(SMALL_FROM)]
    out.mkdir(parents=True, exist_ok=True)
    small = out / f"small_{SMALL_FROM}.png"
    Image.fromarray(small_source(np.asarray(Image.open(base).convert("RGB")))).save(small)
    srcs.append(Source(small.stem, small, f"{SMALL_FROM} downscaled to {SMALL_SIDE} px (face ~60 px) "
                                          "and upscaled back (bicubic)"))
    return srcs
