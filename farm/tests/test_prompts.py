"""build_chunk_prompt on the shipped API workflows: what each chunk prompt reads, drops and writes."""
from __future__ import annotations

import dataclasses
import json

import pytest
from farm_helpers import REPO, SAMPLES, make_job, passthrough_workflow
from swapline_farm.errors import InputError
from swapline_farm.plan import ChunkSpec
from swapline_farm.prompts import (
    FACES,
    INPUT,
    SAVE_NODE,
    TRIM_NODE,
    build_chunk_prompt,
    staged_files,
    staged_name,
)

from devtools.test_media import make_video

BUILTIN = REPO / "workflows" / "api" / "video_swap_builtin.json"


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return make_video(tmp_path_factory.mktemp("clip") / "c.mp4", n=6)


def chunk(job, index=1, start=16, count=16, preroll=8):
    return ChunkSpec(job.job_id, index, start, count, preroll)


def test_builtin_workflow_chunk(clip):
    ref = SAMPLES / "target_reference.png"
    job = make_job(clip, BUILTIN, faces=[SAMPLES / "source_face.png"],
                   settings={"3.image": str(ref), "7.threshold": 0.5})
    c = chunk(job)
    p = build_chunk_prompt(BUILTIN, job, c)
    assert p["1"]["inputs"] == {"video": staged_name(job, "clip", clip), "start": 8, "count": 24, "stride": 1,
                                     "chunk": 16}
    assert p["2"]["inputs"]["image"] == staged_name(job, "face0", SAMPLES / "source_face.png")
    assert p["3"]["inputs"]["image"] == staged_name(job, "3_image", ref)
    assert p["7"]["inputs"]["threshold"] == 0.5
    # the signing sink is gone: pre-roll trimmed, then an unsigned MP4 without audio, same encoder settings
    assert "11" not in p and not any(n["class_type"] == "SwaplineC2PASink" for n in p.values())
    assert p[TRIM_NODE]["inputs"] == {"frames": ["10", 0], "drop": 8}
    save = p[SAVE_NODE]["inputs"]
    assert save["frames"] == [TRIM_NODE, 0] and save["audio"] is False
    assert (save["crf"], save["preset"]) == (18, "medium")
    assert save["filename_prefix"].endswith(c.chunk_id)
    files = staged_files(job)
    assert files[staged_name(job, "clip", clip)] == (str(clip), INPUT)
    assert files[staged_name(job, "3_image", ref)] == (str(ref), INPUT)
    assert len(files) == 3
    # the workflow file itself is untouched
    assert json.loads(BUILTIN.read_text())["1"]["inputs"]["start"] == 0


def test_first_chunk_has_no_trim(clip, tmp_path):
    wf = tmp_path / "p.json"
    wf.write_text(json.dumps(passthrough_workflow()))
    job = make_job(clip, wf)
    p = build_chunk_prompt(wf, job, chunk(job, 0, 0, 16, 0))
    assert TRIM_NODE not in p and p[SAVE_NODE]["inputs"]["frames"] == ["1", 0]
    assert (p["1"]["inputs"]["start"], p["1"]["inputs"]["count"]) == (0, 16)


def test_saved_face_model_replaces_build_face_model(clip, tmp_path):
    fm = tmp_path / "actor.safetensors"
    fm.write_bytes(b"x")
    job = make_job(clip, BUILTIN, faces=[fm])
    p = build_chunk_prompt(BUILTIN, job, chunk(job))
    assert p["5"] == {"class_type": "SwaplineLoadFaceModel", "inputs": {"face_model": staged_name(job, "face0", fm)},
                      "_meta": {"title": "Source face model (farm)"}}
    assert "2" not in p                             # the source image node fed nothing else
    assert staged_files(job)[staged_name(job, "face0", fm)] == (str(fm), FACES)


def test_several_face_images_become_one_batch(clip):
    faces = [SAMPLES / "source_face.png", SAMPLES / "target_reference.png"]
    job = make_job(clip, BUILTIN, faces=faces)
    p = build_chunk_prompt(BUILTIN, job, chunk(job))
    assert p["farm_face1"]["inputs"]["image"] == staged_name(job, "face1", faces[1])
    assert p["farm_batch1"]["inputs"] == {"image1": ["2", 0], "image2": ["farm_face1", 0]}
    assert p["5"]["inputs"]["images"] == ["farm_batch1", 0]


def test_clear_errors(clip, tmp_path):
    wf = json.loads(BUILTIN.read_text())
    for n in wf.values():
        n.pop("_meta", None)
    untitled = tmp_path / "untitled.json"
    untitled.write_text(json.dumps(wf))
    job = make_job(clip, untitled, faces=[SAMPLES / "source_face.png"])
    msg = r"source node: expected one .* found 2 \(2, 3\); name it in the job's inputs.source"
    with pytest.raises(InputError, match=msg):
        build_chunk_prompt(untitled, job, chunk(job))
    named = make_job(clip, untitled, faces=[SAMPLES / "source_face.png"], inputs={"source": "2"})
    assert build_chunk_prompt(untitled, named, chunk(named))["2"]["inputs"]["image"].startswith("farm_")

    bad = make_job(clip, BUILTIN, faces=[SAMPLES / "source_face.png"], settings={"99.x": 1})
    with pytest.raises(InputError, match="setting '99.x'"):
        build_chunk_prompt(BUILTIN, bad, chunk(bad))
    ui = tmp_path / "ui.json"
    ui.write_text(json.dumps({"nodes": [], "links": []}))
    with pytest.raises(InputError, match="UI-format"):
        build_chunk_prompt(ui, dataclasses.replace(job, workflow=ui), chunk(job))
    stride = make_job(clip, BUILTIN, faces=[SAMPLES / "source_face.png"], settings={"1.stride": 2})
    with pytest.raises(InputError, match="stride 1"):
        build_chunk_prompt(BUILTIN, stride, chunk(stride))
