"""The shipped UI workflows in ComfyUI's real editor (frontend 1.32.9, headless Chromium).

For each workflows/*.json: load it as a user does (app.loadGraphData), check that every node type
is known and no missing-nodes/models dialog opened, queue it with the Run button, wait for the
server to finish, and check that the results reached the editor through our extension (QA chart
and status on the QA gate, signing status on the C2PA sink, selection similarities). Screenshots
go to out/test-artifacts/. The neural workflows run on the synthetic buffalo_l/inswapper
stand-ins of the models fixture; the built-in ones need nothing.
"""
from __future__ import annotations

import copy
import json

import pytest
import requests

from devtools.swapline_editor import (
    WORKFLOWS,
    node_id_of,
    run_in_editor,
    save_image,
    ui_workflows,
)

NAMES = ui_workflows()
VIDEO = {"video_swap", "video_swap_builtin", "video_swap_refine"}  # ~15-50 s each on 2 CPU cores
CORE_VIDEO = "video_swap_core_builtin"       # core Load Video -> ... -> core Save Video
# face_refine at CI size (3 frames, 256 px crops, 2 steps) on the SD1.5 stand-ins, set in the editor
SMALL = {"face_refine": {"SwaplineLoadVideo": {"count": 3}, "SwaplineAlignFaces": {"size": "256"},
                         "KSampler": {"steps": 2}},
         "video_swap_refine": {"SwaplineLoadVideo": {"count": 8}, "SwaplineRefineFrames": {"size": "128", "steps": 2}},
         CORE_VIDEO: {"SwaplineVideoToFrames": {"count": 8}}}
PACK = "swapline"  # the folder name under custom_nodes (the harness links the repo under it)
DIALOGS = ".p-dialog, [role=dialog]"


def _diff(a: dict, b: dict) -> dict:
    """Per node id, the inputs that differ: {id: {input: (a, b)}}."""
    out = {}
    for k in sorted(set(a) | set(b)):
        x, y = a.get(k) or {}, b.get(k) or {}
        if x != y:
            xi, yi = x.get("inputs", {}), y.get("inputs", {})
            out[k] = {i: (xi.get(i), yi.get(i)) for i in sorted(set(xi) | set(yi)) if xi.get(i) != yi.get(i)} or (x, y)
    return out


def _shots(segments) -> str:
    """What the QA node's status line says of the per-shot decisions (web/js/swapline.js segmentText)."""
    swapped = [s for s in segments if s["decision"] == "swapped"]
    kept = [s for s in segments if s["decision"] == "kept original"]
    bridged = sum(len(s.get("bridged_frames", [])) for s in swapped)
    failing = sum(len(s.get("shipped_failing_frames", [])) for s in swapped)
    notes = ", ".join(x for x in (f"{bridged} frame(s) bridged" if bridged else "",
                                  f"{failing} failing frame(s) shipped" if failing else "") if x)
    text = f" \u00b7 shots: {len(swapped)} swapped" + (f" ({notes})" if notes else "")
    if kept:
        text += f", {len(kept)} kept original (frames {kept[0]['first']}-{kept[0]['last']}" + (
            f": {kept[0]['reasons'][0]}" if kept[0]["reasons"] else "") + ")"
    return text


def test_shipped_ui_workflows_found():
    assert NAMES == ["face_refine", "image_swap", "image_swap_builtin", "video_swap", "video_swap_builtin",
                     "video_swap_core_builtin", "video_swap_refine"]


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in VIDEO | {CORE_VIDEO} else n
                                  for n in NAMES])
def test_workflow_loads_runs_and_shows_results(editor, artifacts_dir, name):
    res = run_in_editor(editor, name, widgets=SMALL.get(name))
    ui = {int(k): v for k, v in res["ui"].items()}
    outputs = res["outputs"]

    if name == "face_refine":
        video = outputs[str(node_id_of(res, "SwaplineSaveVideo"))]["images"][0]
        assert editor.server.output_path(video).stat().st_size > 1_000
        for node_type in ("SwaplineFaceHint", "PreviewImage"):   # hints and refined crops shown in the editor
            editor.wait_for("(id) => (app.graph.getNodeById(id).imgs || []).length === 3", node_id_of(res, node_type))
    elif name == CORE_VIDEO:
        qa_id = node_id_of(res, "SwaplineQAGate")
        assert ui[qa_id]["qa_frames"] == 8 and ui[qa_id]["has_chart"]
        saved = outputs[str(node_id_of(res, "SaveVideo"))]
        video = (saved.get("images") or saved.get("videos"))[0]
        assert video["filename"].endswith(".mp4") and editor.server.output_path(video).stat().st_size > 10_000
    elif name in VIDEO:
        frames = SMALL.get(name, {}).get("SwaplineLoadVideo", {}).get("count", 48)
        qa_id = node_id_of(res, "SwaplineQAGate")
        sink_id = node_id_of(res, "SwaplineC2PASink")
        sent = outputs[str(qa_id)]["swapline_qa"][0]
        qa = ui[qa_id]
        assert qa["qa_frames"] == len(sent["frames"]) == sent["summary"]["frames"] == frames
        assert qa["has_chart"] and qa["qa_decision"] == sent["decision"]
        untouched = sum(sent["summary"]["faces_skipped"].values())
        assert sent["segments"], "the default policy decides per shot and sends the segments"
        assert qa["status"]["qa"] == f"{sent['decision']}: {sent['summary']['fail']} failing frame(s)" + (
            f" \u00b7 {untouched} face(s) refused by the swap, left untouched" if untouched else ""
        ) + _shots(sent["segments"])
        signing = outputs[str(sink_id)]["swapline_signing"][0]
        assert ui[sink_id]["status"]["signing"].startswith(signing["status"])
        assert signing["status"] == "dev certificate" and signing["results"][0]["signed"]
        video = outputs[str(sink_id)]["images"][0]
        assert editor.server.output_path(video).stat().st_size > 10_000
        # the QA gate's plot preview (an image output) loads in the editor too
        editor.wait_for("(id) => (app.graph.getNodeById(id).imgs || []).length > 0", qa_id)
    else:
        sel_id = node_id_of(res, "SwaplineSelectFaces")
        assert ui[sel_id]["status"]["selection"].startswith("#0: ")
        save_id = node_id_of(res, "SaveImage")
        editor.wait_for("(id) => (app.graph.getNodeById(id).imgs || []).length > 0", save_id)

    if name != "face_refine":
        # the swap node says how many faces it swapped and how many it left untouched, and why
        swap_id = next(node_id_of(res, t) for t in ("SwaplineSwapFrames", "SwaplineSwapFaces")
                       if t in {n["type"] for n in res["loaded"]["nodes"]})
        rep = outputs[str(swap_id)]["swapline_swap"][0]
        status = ui[swap_id]["status"]["swap"]
        assert status.startswith(f"{rep['faces_swapped']} face(s) swapped"), (status, rep)
        assert ("left untouched" in status) == bool(rep["skipped"]), (status, rep)

    # our status/chart widgets never end up in a saved workflow or in the queued prompt
    shipped = {n["id"]: n for n in json.loads((WORKFLOWS / f"{name}.json").read_text())["nodes"]}
    for nid, state in ui.items():
        if state["status"]:
            saved = editor.page.evaluate("(id) => app.graph.getNodeById(id).serialize().widgets_values", nid)
            assert saved == shipped[nid]["widgets_values"], (state["type"], saved)
    prompt = editor.page.evaluate("async () => (await app.graphToPrompt()).output")
    twin = json.loads((WORKFLOWS / "api" / f"{name}.json").read_text())
    for node in twin.values():
        node["inputs"].update(SMALL.get(name, {}).get(node["class_type"], {}))
    # "video-preview" is the frontend's own preview widget of a video upload input (sent as "", ignored
    # by the server). Frontend 1.49.6 also sends core Save Video's codec as the dynamic combo's nested
    # "format.codec" next to the flat "codec" 0.33 keeps for older prompts: the same choice when equal.
    # Everything else must match.
    def keep(i, x, inputs):
        return i != "video-preview" and not ("." in i and inputs.get(i.rsplit(".", 1)[1]) == x)

    strip = lambda p: {k: {"class_type": v["class_type"],  # noqa: E731
                           "inputs": {i: x for i, x in v["inputs"].items() if keep(i, x, v["inputs"])}}
                       for k, v in p.items()}
    # what the editor queued (and would queue again now) is the shipped API twin
    assert not _diff(strip(res["queued_prompt"]), strip(twin)), _diff(strip(res["queued_prompt"]), strip(twin))
    assert not _diff(strip(prompt), strip(twin)), _diff(strip(prompt), strip(twin))

    save_image(editor.graph_png(), artifacts_dir / f"editor_{name}.png", max_width=1600, max_bytes=2_000_000)
    assert not editor.errors(ours_only=True), editor.errors()

    if name in VIDEO and frames == 48:
        save_image(editor.node_png(qa_id), artifacts_dir / f"editor_{name}_qa_chart.png", max_bytes=2_000_000)
        # clicking a point of the chart shows that frame's metrics in the QA status line
        chart_y = editor.page.evaluate(
            "(id) => app.graph.getNodeById(id).widgets.find((w) => w.type === 'swapline.qa_chart').y", qa_id)
        width = editor.page.evaluate("(id) => app.graph.getNodeById(id).size[0]", qa_id)
        editor.click_node_point(qa_id, width / 2, chart_y + 70)
        text = editor.swapline_ui_state()[str(qa_id)]["status"]["qa"]
        assert text.startswith("frame "), text
        frame = int(text.split()[1].rstrip(":"))
        assert 18 <= frame <= 29, text  # the middle of 48 frames
        assert f"identity {sent['frames'][frame]['identity']:.3f}" in text


def test_nodes_do_not_overlap_once_previews_show(editor):
    overlaps = {}
    for name in NAMES:
        editor.load_workflow(json.loads((WORKFLOWS / f"{name}.json").read_text()), name)
        # input previews load asynchronously and grow their nodes
        editor.wait_for("""() => app.graph.nodes.filter((n) => n.type === 'LoadImage')
            .every((n) => (n.imgs || []).length > 0)""")
        editor.page.wait_for_timeout(1500)
        if editor.overlapping_nodes():
            overlaps[name] = editor.overlapping_nodes()
    assert not overlaps, overlaps


def test_missing_models_dialog_names_file_and_folder(editor):
    """A face_refine whose checkpoint is not in models/checkpoints: the editor says which file and
    which folder (from the workflow's properties.models) before anything is queued."""
    wf = copy.deepcopy(json.loads((WORKFLOWS / "face_refine.json").read_text()))
    ckpt = next(n for n in wf["nodes"] if n["type"] == "CheckpointLoaderSimple")
    missing = "swapline_not_downloaded_sd15.safetensors"
    ckpt["widgets_values"][0] = missing
    ckpt["properties"]["models"][0]["name"] = missing
    ckpt["properties"]["models"][0]["url"] = ckpt["properties"]["models"][0]["url"].rsplit("/", 1)[0] + "/" + missing
    try:
        loaded = editor.load_workflow(wf, "face_refine_missing")
        text = "\n".join(loaded["dialogs"])
        assert missing in text and "checkpoints" in text, loaded["dialogs"]
        assert "vae-ft-mse" not in text and "control_v11p" not in text       # the present ones are not listed
    finally:
        editor.close_dialogs()


def test_missing_node_types_are_reported(editor):
    """Negative control for the load check: an unknown node type is caught by our check and by
    the frontend's own missing-nodes dialog."""
    wf = copy.deepcopy(json.loads((WORKFLOWS / "image_swap_builtin.json").read_text()))
    wf["nodes"][0]["type"] = "SwaplineNoSuchNode"
    try:
        loaded = editor.load_workflow(wf, "missing_node_probe")
        assert loaded["unknown_before_load"] == ["SwaplineNoSuchNode"]
        assert "SwaplineNoSuchNode" in loaded["unknown_in_graph"]
        assert any("SwaplineNoSuchNode" in d for d in loaded["dialogs"]), loaded["dialogs"]
    finally:
        editor.close_dialogs()
    assert not editor.dialogs()


def test_template_browser_lists_the_workflows(editor, artifacts_dir):
    server = editor.server
    listed = requests.get(server.url + "/api/workflow_templates", timeout=30).json()
    assert sorted(listed.get(PACK, [])) == NAMES, listed
    for name in NAMES:
        r = requests.get(f"{server.url}/api/workflow_templates/{PACK}/{name}.json", timeout=30)
        assert r.ok and r.json() == json.loads((WORKFLOWS / f"{name}.json").read_text())

    page = editor.page
    thumbs = {}
    page.on("response", lambda r: thumbs.__setitem__(r.url.split("/")[-1], r.status)
            if f"/api/workflow_templates/{PACK}/" in r.url and not r.url.endswith(".json") else None)
    page.evaluate("app.extensionManager.command.execute('Comfy.BrowseTemplates')")
    # frontend 1.32.9 (ComfyUI 0.3.75): a PrimeVue .p-dialog; 1.49.6 (0.33): a role=dialog panel
    # whose sidebar lists custom-node packs under EXTENSIONS
    dialog = page.locator(DIALOGS).filter(has_text="Templates").first
    dialog.get_by_text(PACK, exact=True).first.click()
    for name in NAMES:
        dialog.get_by_text(name, exact=True).first.wait_for(timeout=15_000)
    page.wait_for_function(
        "([sel, n]) => [...document.querySelectorAll(sel.split(', ').map((d) => d + ' img').join(', '))]"
        ".filter((i) => i.complete && i.naturalWidth > 0).length >= n",
        arg=[DIALOGS, len(NAMES)], timeout=15_000)
    page.wait_for_timeout(300)
    save_image(page.screenshot(), artifacts_dir / "editor_templates.png", max_width=1600, max_bytes=2_000_000)
    # both frontends (1.32.9, 1.49.6) ask for <pack>/<name>.jpg beside <name>.json; we ship those files
    assert thumbs == {f"{n}.jpg": 200 for n in NAMES}, thumbs

    # choosing a template loads it into the editor
    dialog.get_by_text("video_swap_builtin", exact=True).first.click()
    page.wait_for_function("(sel) => !document.querySelector(sel)", arg=DIALOGS, timeout=15_000)
    types = page.evaluate("() => app.graph.nodes.map((n) => n.type).sort()")
    shipped = json.loads((WORKFLOWS / "video_swap_builtin.json").read_text())
    assert types == sorted(n["type"] for n in shipped["nodes"])
