"""Manifests and job ids: content-derived, idempotent, and every error names the field and file."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from swapline_farm.jobs import JobSpec, ManifestError, frame_range, job_id, load_manifest, read_workflow

REPO = Path(__file__).resolve().parents[2]
CLIP = REPO / "assets" / "samples" / "kling_avatar_clip.mp4"
FACE = REPO / "assets" / "samples" / "source_face.png"
WORKFLOW = REPO / "workflows" / "api" / "video_swap_builtin.json"


@pytest.fixture()
def media(tmp_path):
    d = tmp_path / "job"
    (d / "clips").mkdir(parents=True)
    shutil.copy(CLIP, d / "clips" / "a.mp4")
    shutil.copy(CLIP, d / "clips" / "b.mp4")
    with open(d / "clips" / "b.mp4", "ab") as f:    # other bytes: another job
        f.write(b"\0")
    shutil.copy(FACE, d / "face.png")
    return d


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


YAML = """
defaults:
  workflow: video_swap_builtin
  faces: [face.png]
  settings: {"9.color_match": false}
jobs:
  - clip: clips/a.mp4
    priority: rush
    webhook: https://hooks.example/x
    destination: out/alice
  - clip: clips/b.mp4
    settings: {"11.crf": 16}
"""


def test_manifest_resolves_paths_roles_and_defaults(media):
    jobs = load_manifest(write(media / "m.yaml", YAML))
    assert [j.clip for j in jobs] == [media / "clips" / "a.mp4", media / "clips" / "b.mp4"]
    a, b = jobs
    assert a.faces == (media / "face.png",) and a.workflow == WORKFLOW
    # roles found by class_type: the LoadImage feeding the swap's face model, not the target reference
    assert a.inputs == {"video": "1", "source": "2", "output": "11"}
    assert a.priority == "rush" and a.webhook == "https://hooks.example/x"
    assert a.destination == media / "out" / "alice"
    assert b.priority == "normal" and b.settings == {"11.crf": 16, "9.color_match": False}
    assert len(a.job_id) == 32 and a.job_id != b.job_id
    assert JobSpec.from_json(json.loads(json.dumps(a.to_json()))) == a


def test_same_content_same_id_whatever_the_formatting(media):
    first = [j.job_id for j in load_manifest(write(media / "m.yaml", YAML))]
    assert [j.job_id for j in load_manifest(media / "m.yaml")] == first        # resubmission: same ids
    # the same jobs as JSON, with the workflow reformatted (indent, key order) under another name
    wf = json.loads(WORKFLOW.read_text())
    (media / "wf.json").write_text(json.dumps(dict(reversed(list(wf.items()))), indent=4))
    doc = {"defaults": {"workflow": "wf.json", "face": "face.png", "settings": {"9.color_match": False}},
           "jobs": [{"clip": "clips/a.mp4", "priority": "rush", "webhook": "https://hooks.example/x",
                     "destination": "out/alice"},
                    {"clip": "clips/b.mp4", "settings": {"11.crf": 16}}]}
    assert [j.job_id for j in load_manifest(write(media / "m.json", json.dumps(doc)))] == first
    # a job listed twice is one job
    assert len(load_manifest(write(media / "twice.yaml", YAML + "  - clip: clips/b.mp4\n    settings: "
                                                              "{\"11.crf\": 16}\n"))) == 2


def test_id_follows_content(media):
    base = job_id(media / "clips" / "a.mp4", [media / "face.png"], WORKFLOW, {"9.color_match": False})
    assert base == job_id(media / "clips" / "a.mp4", [media / "face.png"], read_workflow(WORKFLOW),
                          {"9.color_match": False})
    assert base != job_id(media / "clips" / "b.mp4", [media / "face.png"], WORKFLOW, {"9.color_match": False})
    assert base != job_id(media / "clips" / "a.mp4", [media / "face.png"], WORKFLOW, {"9.color_match": True})
    shutil.copy(REPO / "assets" / "samples" / "target_reference.png", media / "other.png")
    assert base != job_id(media / "clips" / "a.mp4", [media / "other.png"], WORKFLOW, {"9.color_match": False})
    # an explicit key replaces the content hash
    k1 = job_id(media / "clips" / "a.mp4", [media / "face.png"], WORKFLOW, {}, "shot-010")
    assert k1 == job_id(media / "clips" / "b.mp4", [media / "other.png"], WORKFLOW, {"x": 1}, "shot-010")
    assert k1 != job_id(media / "clips" / "a.mp4", [media / "face.png"], WORKFLOW, {}, "shot-020")
    key = load_manifest(write(media / "k.yaml", YAML.replace("priority: rush", "idempotency_key: shot-010")))[0]
    assert key.job_id == k1 and key.idempotency_key == "shot-010"


def _error(media, text: str, name="bad.yaml") -> ManifestError:
    with pytest.raises(ManifestError) as e:
        load_manifest(write(media / name, text))
    assert str(media / name) in str(e.value)
    return e.value


def test_missing_clip_names_field_path_and_fix(media):
    e = _error(media, YAML.replace("clips/b.mp4", "clips/missing.mp4"))
    assert e.field == "jobs[1].clip"
    assert str(media / "clips" / "missing.mp4") in str(e) and "fix the path" in str(e)


@pytest.mark.parametrize("change, field, words", [
    (("priority: rush", "priority: urgent"), "jobs[0].priority", "rush, normal, bulk"),
    (("priority: rush", "colour: red"), "jobs[0].colour", "unknown field"),
    (('"11.crf": 16', '"99.crf": 16'), "jobs[1].settings.99.crf", "node '99' is not in the workflow"),
    (('"11.crf": 16', '"11.crff": 16'), "jobs[1].settings.11.crff", "has no input 'crff'"),
    (('"11.crf": 16', '"11.frames": 1'), "jobs[1].settings.11.frames", "is a link"),
    (("webhook: https://hooks.example/x", "webhook: ftp://x"), "jobs[0].webhook", "http"),
    (("workflow: video_swap_builtin", "workflow: no_such_flow"), "jobs[0].workflow", "video_swap_builtin"),
    (("faces: [face.png]", "faces: [nope.png]"), "jobs[0].faces[0]", "face file not found"),
])
def test_field_errors(media, change, field, words):
    e = _error(media, YAML.replace(*change))
    assert e.field == field and words in str(e), str(e)


def test_workflow_errors(media):
    (media / "ui.json").write_text(json.dumps({"nodes": [], "links": []}))
    e = _error(media, YAML.replace("workflow: video_swap_builtin", "workflow: ui.json"))
    assert e.field == "jobs[0].workflow" and "Export (API)" in str(e)
    # two LoadImage nodes, none wired to a swap's face model: the source must be named
    wf = {"1": {"class_type": "SwaplineLoadVideo", "inputs": {"video": "x.mp4", "start": 0, "count": 0}},
          "2": {"class_type": "LoadImage", "inputs": {"image": "a.png"}},
          "3": {"class_type": "LoadImage", "inputs": {"image": "b.png"}}}
    (media / "two.json").write_text(json.dumps(wf))
    e = _error(media, YAML.replace("workflow: video_swap_builtin", "workflow: two.json"))
    assert e.field == "jobs[0].inputs.source" and "inputs: {source:" in str(e)
    ok = load_manifest(write(media / "named.yaml", "defaults: {inputs: {source: \"3\"}}\n"
                             "jobs: [{clip: clips/a.mp4, face: face.png, workflow: two.json}]"))
    assert ok[0].inputs == {"video": "1", "source": "3"}
    # a face model where the workflow loads an image
    shutil.copy(media / "face.png", media / "face.safetensors")
    e = _error(media, YAML.replace("faces: [face.png]", "faces: [face.safetensors]"))
    assert e.field == "jobs[0].faces" and "LoadImage" in str(e)


def test_top_level_errors(media):
    assert _error(media, "jobs: []").field == "jobs"
    assert _error(media, "jobs: [{clip: clips/a.mp4}]\nextra: 1").field == "extra"
    assert "line" in str(_error(media, "jobs: [\n  - clip: [unclosed\n")).lower()
    assert _error(media, "defaults: {clip: a.mp4}\njobs: [{clip: clips/a.mp4}]").field == "defaults.clip"
    assert _error(media, "jobs: [{clip: clips/a.mp4}]").field == "jobs[0].faces"
    with pytest.raises(ManifestError, match="file not found"):
        load_manifest(media / "absent.yaml")


def test_frame_range_applies_settings(media):
    job = load_manifest(write(media / "m.yaml", YAML.replace('"11.crf": 16', '"1.count": 12, "1.start": 4')))[1]
    assert frame_range(job) == (4, 12, 1)
    assert frame_range(load_manifest(media / "m.yaml")[0]) == (0, 0, 1)
