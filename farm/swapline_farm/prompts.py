"""One chunk of a job as a ComfyUI API prompt.

The job's workflow (API format) is changed in four places: the Load Video node reads the chunk's
frames plus its pre-roll, the source node reads the job's face file, the signing sink becomes an
unsigned per-chunk MP4 without audio (the coordinator muxes the audio once and signs once), and a
Trim Frames node in front of it drops the pre-roll. Files are referred to by *staged names*:
names in the worker's ComfyUI input folder (or its face-model folder) that the worker fills from
``staged_files`` before it queues the prompt. Names derive from the content-derived job id, so the
same job on the same worker is staged once.
"""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path

from .errors import InputError

VIDEO_CLASSES = ("SwaplineLoadVideo",)
FACE_IMAGE_CLASSES = ("LoadImage",)
FACE_MODEL_CLASSES = ("SwaplineLoadFaceModel",)
SINK_CLASSES = ("SwaplineC2PASink", "SwaplineSaveVideo")
TRIM_NODE, SAVE_NODE = "farm_trim", "farm_save"
FARM_SETTING = "farm."          # settings for the farm itself (chunk_frames, preroll, timeout_s), not nodes
FACE_MODEL_EXT = ".safetensors"

# Where a staged file goes on the worker: ComfyUI's input folder, or the face-model folder.
INPUT, FACES = "input", "faces"


def load_workflow(workflow) -> dict:
    """An API-format workflow from a dict or a JSON file, with a clear error for UI-format files."""
    if isinstance(workflow, dict):
        data = workflow
    else:
        path = Path(workflow)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise InputError(f"workflow {path}: cannot read it as JSON ({exc})") from exc
    if "nodes" in data and "links" in data:
        raise InputError(f"workflow {workflow}: this is a UI-format workflow; export it with 'Save (API)' "
                         "(the shipped ones are under workflows/api/)")
    if not data or not all(isinstance(n, dict) and "class_type" in n for n in data.values()):
        raise InputError(f"workflow {workflow}: not an API-format workflow (node id -> {{class_type, inputs}})")
    return data


def _find(prompt: dict, role: str, given, classes: tuple[str, ...], workflow_name: str, prefer: str = "") -> str:
    if given is not None:
        node = str(given)
        if node not in prompt:
            raise InputError(f"workflow {workflow_name}: inputs.{role} names node {node}, which is not in it "
                             f"(nodes: {', '.join(sorted(prompt))})")
        return node
    found = [k for k, n in prompt.items() if n["class_type"] in classes]
    if len(found) > 1 and prefer:
        titled = [k for k in found if prefer in str(prompt[k].get("_meta", {}).get("title", "")).lower()]
        found = titled if len(titled) == 1 else found
    if len(found) != 1:
        what = "none" if not found else f"{len(found)} ({', '.join(found)})"
        raise InputError(f"workflow {workflow_name}: {role} node: expected one {' or '.join(classes)} node, found "
                         f"{what}; name it in the job's inputs.{role}")
    return found[0]


def roles(prompt: dict, job) -> dict:
    """{"video", "source" (or None when the workflow takes no face), "output"} node ids."""
    name = str(getattr(job, "workflow", "workflow"))
    given = dict(getattr(job, "inputs", None) or {})
    video = _find(prompt, "video", given.get("video"), VIDEO_CLASSES, name)
    source = None
    if job.faces or given.get("source") is not None:
        source = _find(prompt, "source", given.get("source"), FACE_IMAGE_CLASSES + FACE_MODEL_CLASSES, name,
                       prefer="source")
    output = _find(prompt, "output", given.get("output"), SINK_CLASSES, name)
    return {"video": video, "source": source, "output": output}


def _tag(job) -> str:
    return str(job.job_id)[:16]


def staged_name(job, label: str, path) -> str:
    """The flat file name a job's file gets on a worker (flat: ComfyUI caches folder listings by the
    folder's mtime, which a file added inside a subfolder would not change)."""
    ext = Path(path).suffix.lower()
    return f"farm_{_tag(job)}_{label}{ext}"


def staged_files(job, workflow=None) -> dict[str, tuple[str, str]]:
    """Every file the job's prompts refer to: staged name -> (local path, INPUT or FACES)."""
    out = {staged_name(job, "clip", job.clip): (str(job.clip), INPUT)}
    for i, face in enumerate(job.faces):
        kind = FACES if str(face).lower().endswith(FACE_MODEL_EXT) else INPUT
        out[staged_name(job, f"face{i}", face)] = (str(face), kind)
    for key, value in _node_settings(job).items():
        if _is_file_value(value):
            out[staged_name(job, key.replace(".", "_"), value)] = (str(value), INPUT)
    return out


def _node_settings(job) -> dict:
    return {k: v for k, v in (getattr(job, "settings", None) or {}).items() if not k.startswith(FARM_SETTING)}


def _is_file_value(value) -> bool:
    return isinstance(value, (str, os.PathLike)) and os.path.isabs(str(value)) and os.path.isfile(str(value))


def farm_setting(job, name: str, default=None):
    return (getattr(job, "settings", None) or {}).get(FARM_SETTING + name, default)


def _apply_settings(prompt: dict, job) -> None:
    for key, value in _node_settings(job).items():
        node, _, inp = key.partition(".")
        if node not in prompt or not inp:
            raise InputError(f"setting '{key}': expected '<node id>.<input name>' with a node of the workflow "
                             f"(nodes: {', '.join(sorted(prompt))})")
        if _is_file_value(value):
            value = staged_name(job, key.replace(".", "_"), value)
        prompt[node]["inputs"][inp] = value


def _set_source(prompt: dict, job, source: str) -> None:
    faces = list(job.faces)
    models = [f for f in faces if str(f).lower().endswith(FACE_MODEL_EXT)]
    node = prompt[source]
    if models:
        if len(faces) != 1:
            raise InputError(f"job {job.job_id}: give one saved face model (.safetensors) or face images, not both "
                             f"or several models ({', '.join(map(str, faces))})")
        name = staged_name(job, "face0", faces[0])
        if node["class_type"] in FACE_MODEL_CLASSES:
            node["inputs"]["face_model"] = name
            return
        # An image-based workflow given a saved model: the Build Face Model fed by the source image
        # becomes a Load Face Model (both put the FACE_MODEL on output 0).
        builders = [k for k, n in prompt.items() if n["class_type"] == "SwaplineBuildFaceModel"
                    and n["inputs"].get("images") == [source, 0]]
        if len(builders) != 1:
            raise InputError(f"job {job.job_id}: a saved face model was given but the workflow's source node "
                             f"{source} ({node['class_type']}) does not feed exactly one Build Face Model")
        prompt[builders[0]] = {"class_type": "SwaplineLoadFaceModel", "inputs": {"face_model": name},
                               "_meta": {"title": "Source face model (farm)"}}
        if not any(_links_to(n, source) for n in prompt.values()):
            del prompt[source]
        return
    if node["class_type"] not in FACE_IMAGE_CLASSES:
        raise InputError(f"job {job.job_id}: face images were given but the source node {source} is a "
                         f"{node['class_type']}; give a saved face model (.safetensors) instead")
    node["inputs"]["image"] = staged_name(job, "face0", faces[0])
    if len(faces) > 1:
        # Several source images: one batch, so Build Face Model averages them.
        last = [source, 0]
        for i, face in enumerate(faces[1:], start=1):
            load, batch = f"farm_face{i}", f"farm_batch{i}"
            prompt[load] = {"class_type": "LoadImage", "inputs": {"image": staged_name(job, f"face{i}", face)}}
            prompt[batch] = {"class_type": "ImageBatch", "inputs": {"image1": last, "image2": [load, 0]}}
            last = [batch, 0]
        for key, n in prompt.items():
            if key.startswith("farm_batch"):
                continue
            for inp, v in n["inputs"].items():
                if v == [source, 0]:
                    n["inputs"][inp] = last


def _links_to(node: dict, target: str) -> bool:
    return any(isinstance(v, list) and len(v) == 2 and str(v[0]) == target for v in node["inputs"].values())


def output_prefix(job, chunk) -> str:
    return f"farm/{_tag(job)}/{chunk.chunk_id}"


def build_chunk_prompt(workflow, job, chunk) -> dict:
    """The API prompt that renders ``chunk`` of ``job`` (see the module docstring)."""
    prompt = copy.deepcopy(load_workflow(workflow))
    ids = roles(prompt, job)
    _apply_settings(prompt, job)
    video = prompt[ids["video"]]["inputs"]
    if int(video.get("stride", 1)) != 1:
        raise InputError(f"workflow {job.workflow}: Load Video node {ids['video']} has stride "
                         f"{video.get('stride')}; farm chunks are planned on every frame, so set stride 1")
    first = chunk.start - chunk.preroll
    if first < 0:
        raise InputError(f"chunk {chunk.index} of job {job.job_id}: pre-roll {chunk.preroll} reaches before frame 0")
    video.update(video=staged_name(job, "clip", job.clip), start=first, count=chunk.count + chunk.preroll)
    if ids["source"] is not None:
        _set_source(prompt, job, ids["source"])
    sink_id = ids["output"]
    sink = prompt.pop(sink_id)
    frames = sink["inputs"].get("frames")
    if not (isinstance(frames, list) and len(frames) == 2):
        raise InputError(f"workflow {job.workflow}: output node {sink_id} ({sink['class_type']}) has no 'frames' "
                         "link; the farm chunks video workflows only")
    users = [k for k, n in prompt.items() if _links_to(n, sink_id)]
    if users:
        raise InputError(f"workflow {job.workflow}: nodes {', '.join(users)} use the output node {sink_id}; "
                         "the farm replaces it, so nothing may read from it")
    if chunk.preroll:
        prompt[TRIM_NODE] = {"class_type": "SwaplineTrimFrames", "inputs": {"frames": frames, "drop": chunk.preroll},
                             "_meta": {"title": "Drop pre-roll (farm)"}}
        frames = [TRIM_NODE, 0]
    s = sink["inputs"]
    prompt[SAVE_NODE] = {"class_type": "SwaplineSaveVideo",
                         "inputs": {"frames": frames, "filename_prefix": output_prefix(job, chunk),
                                    "crf": int(s.get("crf", 18)), "preset": str(s.get("preset", "medium")),
                                    "audio": False},
                         "_meta": {"title": f"Chunk {chunk.index} (farm, unsigned)"}}
    return prompt
