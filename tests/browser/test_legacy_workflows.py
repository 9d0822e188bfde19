"""UI workflows saved before the QA gate's limits moved to QA Limit Overrides, in the real editor.

The fixture is workflows/video_swap_builtin.json as shipped before the fold (commit bdcec07^): the
gate's 19 widget values in the old order. web/js/qa_gate_legacy.js must re-read them by name on
load and move any limit that was set to a new QA Limit Overrides node linked to the gate, so the
editor queues what the shipped (new) workflow queues, plus that node. Run on the built-in models.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from devtools.swapline_editor import WORKFLOWS, save_image

OLD = Path(__file__).parent / "fixtures" / "video_swap_builtin_before_qa_fold.json"
OLD_ORDER = ["policy", "min_identity", "max_leakage", "max_landmark_drift", "max_flicker_ratio",
             "require_redetection", "sample_every", "filename_prefix", "max_mouth_delta", "min_expression_corr",
             "max_occluder_overwrite", "max_colour_cast", "max_seam_ratio", "max_bleed", "max_offface",
             "min_coverage", "allow_no_face", "max_safety_score", "limit_set"]
FRAMES = 8  # Load Video's count, set in the editor as a user would: CI size
TOASTS = ".p-toast-message, [data-pc-name=toast] [role=alert]"


def _gate(workflow: dict) -> dict:
    return next(n for n in workflow["nodes"] if n["type"] == "SwaplineQAGate")


def _inputs(prompt: dict) -> dict:
    # "video-preview": the frontend's own preview widget of a video upload input (sent as "", ignored)
    return {k: {"class_type": v["class_type"], "inputs": {i: x for i, x in v["inputs"].items() if i != "video-preview"}}
            for k, v in prompt.items()}


def test_fixture_is_the_old_layout():
    """Guards the fixture: 19 values in the old order, every limit at -1 (the shipped defaults)."""
    values = _gate(json.loads(OLD.read_text()))["widgets_values"]
    assert len(values) == len(OLD_ORDER) == 19
    assert values[OLD_ORDER.index("limit_set")] == "auto (viewer-labelled for the built-in swap)"
    assert [values[i] for i, n in enumerate(OLD_ORDER) if n.startswith(("min_", "max_")) and n != "max_safety_score"
            ] == [-1.0] * 12


@pytest.mark.slow
@pytest.mark.parametrize("limits", [{}, {"max_seam_ratio": 1.3}], ids=["all_limits_unset", "max_seam_ratio_set"])
def test_old_ui_workflow_loads_remapped_and_runs(editor, artifacts_dir, limits):
    workflow = json.loads(OLD.read_text())
    for name, value in limits.items():
        _gate(workflow)["widgets_values"][OLD_ORDER.index(name)] = value
    editor.page.evaluate("() => document.querySelectorAll('.p-toast-message').forEach((t) => t.remove())")
    console_before = len(editor.console)
    loaded = editor.load_workflow(copy.deepcopy(workflow), "video_swap_builtin_before_qa_fold")
    assert not loaded["unknown_in_graph"] and not loaded["dialogs"], loaded
    gate_id = int(_gate(workflow)["id"])

    # the gate's widgets hold what the shipped (new-layout) workflow holds, by name, with the policy
    # the old workflow was saved with (loading it must not change the user's choice; the shipped
    # workflows have since moved to "keep original unless few fail")
    shipped = json.loads((WORKFLOWS / "video_swap_builtin.json").read_text())
    saved = editor.page.evaluate("(id) => app.graph.getNodeById(id).serialize().widgets_values", gate_id)
    old_policy = _gate(workflow)["widgets_values"][OLD_ORDER.index("policy")]
    assert old_policy == "keep original"
    expected = list(_gate(shipped)["widgets_values"])
    expected[0] = old_policy                                  # the policy is the gate's first widget
    assert saved == expected, saved

    graph = editor.page.evaluate("""(id) => {
        const gate = app.graph.getNodeById(id);
        const slot = gate.findInputSlot('limits');
        const link = gate.inputs[slot].link == null ? null : app.graph.links.get?.(gate.inputs[slot].link)
            ?? app.graph.links[gate.inputs[slot].link];
        return {
            limits_origin: link ? link.origin_id : null,
            overrides: app.graph.nodes.filter((n) => n.type === 'SwaplineQALimitOverrides').map((n) => ({
                id: n.id, widgets: Object.fromEntries(n.widgets.map((w) => [w.name, w.value]))})),
            unapplied: gate.properties.swapline_unapplied_limits ?? null,
        };
    }""", gate_id)
    toasts = editor.page.evaluate("(sel) => [...document.querySelectorAll(sel)].map((t) => t.innerText)", TOASTS)
    assert graph["unapplied"] is None, graph
    if limits:
        assert len(graph["overrides"]) == 1, graph
        ovr = graph["overrides"][0]
        assert graph["limits_origin"] == ovr["id"], graph
        assert {k: v for k, v in ovr["widgets"].items() if v != -1} == limits, ovr
        # one notice naming the moved limit and the new node
        assert len(toasts) == 1 and "max_seam_ratio 1.3" in toasts[0] and f"#{ovr['id']}" in toasts[0], toasts
        editor.fit_view()
        save_image(editor.page.screenshot(), artifacts_dir / "editor_old_qa_gate_limit_moved.png", max_width=1600,
                   max_bytes=2_000_000)
    else:
        assert graph == {"limits_origin": None, "overrides": [], "unapplied": None}, graph
        assert not toasts, toasts
        assert any("re-read by name" in c for c in editor.console[console_before:]), editor.console[console_before:]

    editor.page.evaluate("""(n) => {
        const w = app.graph.nodes.find((x) => x.type === 'SwaplineLoadVideo').widgets.find((x) => x.name === 'count');
        w.value = n; w.callback?.(n);
    }""", FRAMES)
    queued = editor.queue_from_ui()
    assert queued["_http_status"] == 200 and not queued.get("node_errors") and "prompt_id" in queued, queued

    # what the editor queued is the shipped API workflow (+ the overrides node and its link)
    twin = _inputs(json.loads((WORKFLOWS / "api" / "video_swap_builtin.json").read_text()))
    twin["1"]["inputs"]["count"] = FRAMES
    # ... with the models the old workflow chose (the analyzer and swapper it was saved with: loading
    # it must not change them; the shipped workflow has since moved to the mesh path)
    old_nodes = {n["type"]: n for n in json.loads(OLD.read_text())["nodes"]}
    for node in twin.values():
        for cls, key in (("SwaplineAnalyzerLoader", "pack"), ("SwaplineSwapperLoader", "swapper")):
            if node["class_type"] == cls:
                node["inputs"][key] = old_nodes[cls]["widgets_values"][0]
        if node["class_type"] == "SwaplineQAGate":
            node["inputs"]["policy"] = old_policy
    if limits:
        ovr_id = str(graph["overrides"][0]["id"])
        twin[str(gate_id)]["inputs"]["limits"] = [ovr_id, 0]
        twin[ovr_id] = {"class_type": "SwaplineQALimitOverrides",
                        "inputs": {k: limits.get(k, -1) for k in graph["overrides"][0]["widgets"]}}
    assert _inputs(queued["_prompt"]) == twin, {k: (v, twin.get(k)) for k, v in _inputs(queued["_prompt"]).items()
                                                if twin.get(k) != v}

    entry = editor.wait_finished(queued["prompt_id"], timeout=600)
    assert entry["status"]["status_str"] == "success", entry["status"]
    chart = entry["outputs"][str(gate_id)]["swapline_qa"][0]
    assert chart["summary"]["frames"] == FRAMES
    report = json.loads(editor.server.output_path({"filename": Path(chart["report_file"]).name,
                                                   "subfolder": str(Path(chart["report_file"]).parent)}).read_text())
    assert report.get("limit_overrides") == (limits or None), report.get("limit_overrides")
    if limits:
        assert chart["thresholds"]["max_seam_ratio"] == pytest.approx(1.3), chart["thresholds"]
    else:
        assert chart["thresholds"]["max_seam_ratio"] != pytest.approx(1.3)
    assert not editor.errors(ours_only=True), editor.errors()
