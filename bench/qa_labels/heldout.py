"""The independent check of issues 48 and 49: the shipped swap and gate on clips nobody here has looked at.

    .venv/bin/python -m bench.qa_labels.heldout            # choose the clips (once), write heldout/clips.json
    QA_LABELS_SET=heldout .venv/bin/python -m bench.qa_labels.build --swapper mesh4 --sources ...
    QA_LABELS_SET=heldout .venv/bin/python -m bench.qa_labels.labels sheets --mixed heldout-1
    QA_LABELS_SET=heldout .venv/bin/python -m bench.qa_labels.agreement --heldout

The candidates are the clips of the video wheel (comfyui-workflow-templates-media-video 0.3.101) that
no file of this repository named when the check was made: not the development set, not issue 48's
eight clips, not the quality bench's or the sample media's clips. They are chosen by a rule a program
applies, before anyone looks at a frame: the first FRAMES frames of each candidate through the mesh
analyzer's detector; a clip qualifies when its largest face is at least MIN_SIDE px on at least
MIN_FRAMES of them; a seeded shuffle of the qualifying clips, the first COUNT. Nothing is tuned on
these clips: their labels measure the limits and the swap chosen on the development set, and a
change made after looking at them would make them development clips (say so, and choose anew from
what is left).
"""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from ..paths import QUALITY_MEDIA

ROOT = Path(__file__).resolve().parent / "heldout"
CLIPS_JSON = ROOT / "clips.json"
CACHE = QUALITY_MEDIA / "heldout"
FRAMES, MIN_SIDE, MIN_FRAMES, COUNT, SEED = 24, 60, 12, 8, 48
CANDIDATES = (
    "api_google_gemini_omni_flash_i2v-1", "api_google_gemini_omni_flash_video_edit-1",
    "api_google_gemini_omni_flash_video_edit-2", "api_grok_imagine_video_1_5-1", "api_grok_reference_to_video-1",
    "api_grok_video_edit-1", "api_grok_video_edit-2", "api_grok_video_extend-1", "api_happyhorse1_1_r2v-1",
    "api_kling_motion_control3-1", "api_kling_o3_flf2v-1", "api_kling_o3_video_edit-2", "api_kling_v3_video-1",
    "api_luma_ray3_3_i2v-1", "api_luma_ray3_3_t2v-1", "api_runway_aleph2_video_edit-1",
    "api_runway_aleph2_video_edit-2", "api_seedance2_0_mini_t2v-1", "api_vidu_q3_image_to_video-1",
    "api_vidu_q3_text_to_video-1", "api_wan2_7_t2v-1", "image_to_video_wan-1", "ltxv_image_to_video-1",
    "ltxv_text_to_video-1", "text_to_video_wan-1", "txt_to_image_to_video-1", "video_capybara_v0_1_video_edit-1",
    "video_capybara_v0_1_video_edit-2", "video_causal_forcing_i2v-1", "video_humo-1",
    "video_hunyuan_video_1.5_720p_i2v-1", "video_hunyuan_video_1.5_720p_t2v-1", "video_ltx2_3_flf2v-1",
    "video_ltx2_3_ia2v-1", "video_ltx2_3_ic_lora-1", "video_ltx2_3_ic_lora-2", "video_ltx2_3_id_lora-1",
    "video_ltx2_3_t2v-1", "video_ltx2_i2v_lora-1", "video_wan2.1_alpha_t2v_14B-1",
    "video_wan2.1_fun_camera_v1.1_1.3B-1", "video_wan21_scail2_character_replacement-1",
    "video_wan21_scail2_character_replacement-2", "video_wan2_2_14B_flf2v-2", "video_wan2_2_14B_fun_camera-1",
    "video_wan2_2_14B_fun_control-1", "video_wan2_2_14B_fun_inpaint-1", "video_wan2_2_14B_i2v-1",
    "video_wan2_2_14B_i2v-2", "video_wan2_2_14B_s2v-1", "video_wan2_2_5B_fun_inpaint-1", "video_wan_ati-1",
    "video_wan_ati-2", "video_wan_vace_14B_ref2v-1", "video_wan_vace_14B_t2v-1", "video_wan_vace_inpainting-1",
    "video_wan_vace_inpainting-2", "video_wan_vace_outpainting-1", "video_wan_vace_outpainting-2",
)


def clips() -> list[dict]:
    """The chosen clips ({name, shows, ...}) from clips.json; an error says how to choose them."""
    if not CLIPS_JSON.is_file():
        raise SystemExit(f"{CLIPS_JSON} is missing: run python -m bench.qa_labels.heldout to choose the clips")
    return json.loads(CLIPS_JSON.read_text())["chosen"]


def fetch(names) -> list[Path]:
    from ..quality.panel import _fsm

    return _fsm().fetch(CACHE, members=tuple(f"templates/{n}.webp" for n in names))


def _largest_sides(path: Path) -> list[float]:
    from swapline_core.backends.mesh_analyzer import MeshAnalyzer
    from swapline_core.video.read import iter_frames

    an = MeshAnalyzer()
    sides = []
    for _, f in iter_frames(str(path), count=FRAMES):
        faces = an.detect([f])[0]
        sides.append(max((min(x.bbox[2] - x.bbox[0], x.bbox[3] - x.bbox[1]) for x in faces), default=0.0))
    return sides


def choose(log=print) -> dict:
    paths = fetch(CANDIDATES)
    readings = {}
    for name, path in zip(CANDIDATES, paths):
        sides = _largest_sides(path)
        readings[name] = {"frames": len(sides), "frames_with_face_ge_min": int(sum(s >= MIN_SIDE for s in sides)),
                          "median_largest_side": round(float(sorted(sides)[len(sides) // 2]), 1) if sides else 0}
        log(f"heldout: {name}: {readings[name]}")
    qualifying = sorted(n for n, r in readings.items() if r["frames_with_face_ge_min"] >= MIN_FRAMES)
    order = qualifying[:]
    random.Random(SEED).shuffle(order)
    chosen = [{"name": n, "shows": "", **readings[n]} for n in order[:COUNT]]
    res = {"rule": {"frames": FRAMES, "min_side_px": MIN_SIDE, "min_frames": MIN_FRAMES, "count": COUNT,
                    "seed": SEED, "detector": "the mesh analyzer's BlazeFace (swapline_core.backends.mesh_analyzer)"},
           "qualifying": qualifying, "chosen": chosen, "readings": readings}
    ROOT.mkdir(parents=True, exist_ok=True)
    CLIPS_JSON.write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    return res


def main(argv=None) -> None:
    if CLIPS_JSON.is_file() and "--again" not in (argv or sys.argv[1:]):
        raise SystemExit(f"{CLIPS_JSON} exists: the clips are chosen once (--again only if none was labelled)")
    res = choose()
    print(json.dumps({"qualifying": len(res["qualifying"]), "chosen": [c["name"] for c in res["chosen"]]}, indent=1))


if __name__ == "__main__":
    main()
