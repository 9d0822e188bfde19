"""Issue 18 over HTTP: bad input is rejected before anything runs, nothing half-succeeds, and the
model that ran is the model recorded."""
from __future__ import annotations

import copy
import json
import os
import re
import shutil
from pathlib import Path

from devtools.comfy_harness import PromptRejected

REPO = Path(__file__).resolve().parents[2]
API = REPO / "workflows" / "api"
BAD = "Not-A-Choice"



def _load(name: str) -> dict:
    return json.loads((API / f"{name}.json").read_text())


def _combo_options(info: dict, class_type: str, name: str):
    spec = info[class_type]["input"]
    entry = spec.get("required", {}).get(name) or spec.get("optional", {}).get(name)
    if not entry:
        return None
    kind = entry[0]
    if isinstance(kind, list):
        return kind
    if kind == "COMBO":
        return entry[1].get("options", [])
    return None


# core's own V3 nodes that shipped workflows use (comfy_extras/nodes_video.py)
CORE_V3 = {"LoadVideo", "SaveVideo", "GetVideoComponents", "CreateVideo"}


def _core_checks_v3_combos(comfy, info: dict, class_type: str) -> bool:
    """ComfyUI checks combo values of its own V3 nodes (core Load/Save Video) only since v0.8.0;
    classic nodes (LoadImage ...) always. Swapline checks its own nodes on every version."""
    if class_type not in CORE_V3:
        return True
    text = (Path(comfy.comfy_dir) / "comfyui_version.py").read_text()
    version = tuple(int(x) for x in re.search(r'"(\d+)\.(\d+)\.(\d+)', text).groups())
    return version >= (0, 8, 0)


def _rejection(comfy, prompt: dict, what: str = "") -> dict:
    try:
        pid = comfy.queue(prompt)
    except PromptRejected as exc:
        return exc.body
    comfy.interrupt()
    raise AssertionError(f"prompt accepted ({pid}) though {what or 'it is invalid'}")


def test_every_enum_of_every_shipped_workflow_rejects_a_bad_value(staged):
    info = staged.object_info()
    checked = []
    for path in sorted(API.glob("*.json")):
        wf = json.loads(path.read_text())
        for node_id, node in wf.items():
            for name, value in node["inputs"].items():
                if isinstance(value, list) or _combo_options(info, node["class_type"], name) is None:
                    continue
                if not _core_checks_v3_combos(staged, info, node["class_type"]):
                    continue  # core's own V3 node on a ComfyUI that never checks V3 combos (< 0.8)
                bad = copy.deepcopy(wf)
                bad[node_id]["inputs"][name] = BAD
                body = _rejection(staged, bad, f"{path.name} node {node_id} {name}={BAD!r}")
                errs = body.get("node_errors", {}).get(node_id, {}).get("errors", [])
                text = json.dumps(errs)
                assert errs and name in text and BAD in text, (path.name, node_id, name, body)
                if node["class_type"].startswith("Swapline"):
                    allowed = _combo_options(info, node["class_type"], name)
                    assert any(str(o) in text for o in allowed), text  # names what is allowed
                    assert str(staged.base_dir) not in text and str(REPO) not in text, text
                checked.append((path.stem, node["class_type"], name))
    swapline = [c for c in checked if c[1].startswith("Swapline")]
    assert ("video_swap_builtin", "SwaplineTrackFaces", "mode") in checked
    assert len(swapline) >= 20, checked


def test_track_mode_typo_is_rejected_naming_input_value_and_choices(staged):
    wf = _load("video_swap_builtin")
    wf["7"]["inputs"]["mode"] = "Identity"
    body = _rejection(staged, wf)
    text = json.dumps(body["node_errors"]["7"])
    assert "mode" in text and "Identity" in text and "identity" in text and "largest" in text


def test_a_literal_for_a_frames_socket_is_rejected(staged):
    wf = _load("video_swap_builtin")
    wf["9"]["inputs"]["frames"] = 42
    body = _rejection(staged, wf)
    text = json.dumps(body["node_errors"]["9"])
    assert "frames" in text and "42" in text and "SWAPLINE_FRAMES" in text


def test_invalid_sink_settings_reject_the_whole_prompt(staged):
    """The QA gate must not run (and write its report) while the sink is dropped."""
    wf = _load("video_swap_builtin")
    wf["10"]["inputs"]["filename_prefix"] = "swapline/half_success"
    wf["11"]["inputs"]["crf"] = 99
    body = _rejection(staged, wf)
    assert "11" in body["node_errors"]
    assert body["error"]["type"] == "prompt_outputs_failed_validation"
    assert not list((staged.base_dir / "output" / "swapline").glob("half_success*"))


def _audit_models(comfy) -> list[dict]:
    lines = (comfy.base_dir / "output" / "swapline_audit.jsonl").read_text().splitlines()
    return json.loads(lines[-1])["models"]


def _replace(path: Path, src: Path) -> None:
    # models_dir holds hard links into the shared synthetic cache: never write through them
    tmp = path.with_suffix(".tmp")
    shutil.copy(src, tmp)
    os.replace(tmp, path)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10_000_000))


def test_model_replaced_between_prompts_is_reloaded_and_recorded(staged, models_dir, tmp_path):
    import sys

    sys.path.insert(0, str(REPO / "tests" / "unit" / "backends"))
    from test_model_identity import _other_swapper

    from swapline_core.provenance.hashing import sha256_file

    live = models_dir / "insightface" / "inswapper_128.onnx"
    original = tmp_path / "a.onnx"
    shutil.copy(live, original)
    other = tmp_path / "b.onnx"
    _other_swapper(original, other)
    wf = _load("video_swap")
    wf["1"]["inputs"]["count"] = 4
    wf["11"]["inputs"]["filename_prefix"] = "swapline/model_swap"
    try:
        staged.run(wf)
        first = {m["name"]: m["sha256"] for m in _audit_models(staged)}
        assert first["inswapper_128.onnx"] == sha256_file(original)
        _replace(live, other)
        staged.run(wf)
        second = {m["name"]: m["sha256"] for m in _audit_models(staged)}
        assert second["inswapper_128.onnx"] == sha256_file(other)
    finally:
        _replace(live, original)


# ComfyUI 0.33: scripts/test.sh runs this whole file a second time against .comfy/ComfyUI-0.33
# (SWAPLINE_COMFYUI), so every check above is also made there.
