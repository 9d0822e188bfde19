"""Convert between ComfyUI's API prompt format and the editor's UI (LiteGraph) format.

The shipped UI workflows are generated from the API ones with the node definitions a real
server reports at /object_info, and tests convert them back the same way, so both formats
are executed. Used by scripts/make_workflows.py and tests; not part of the pack.
"""
from __future__ import annotations

WIDGET_TYPES = {"INT", "FLOAT", "STRING", "BOOLEAN", "COMBO"}
# Room for what the editor draws below the widgets (input previews, result images, the QA
# chart), so nodes laid out in a column do not cover each other once those appear.
PREVIEW_HEIGHT = {"LoadImage": 240, "SwaplineLoadVideo": 320, "SaveImage": 260, "PreviewImage": 260,
                  "SwaplineDetectFaces": 240, "SwaplineSelectFaces": 240, "SwaplineQAGate": 420,
                  "SwaplineC2PASink": 300, "LoadVideo": 320, "SaveVideo": 320}


# ComfyUI >= 0.2x: a combo whose chosen option brings its own inputs (core Save Video's format ->
# codec -> encoding). The prompt names a nested input "<combo>.<input>".
DYNAMIC_COMBO = "COMFY_DYNAMICCOMBO_V3"


def is_widget(spec) -> bool:
    kind = spec[0]
    return isinstance(kind, list) or kind in WIDGET_TYPES or kind == DYNAMIC_COMBO


def _dynamic_values(name: str, spec, values: list, k: int, flat: set, inputs: dict) -> int:
    """Read a dynamic combo's chosen option and its nested widgets from widgets_values (from k);
    returns the next index. A nested input the node also declares at top level (0.33 keeps
    Save Video's `codec` for prompts written for older ComfyUI) is written under that name."""
    if k >= len(values):
        return k
    key = values[k]
    inputs[name] = key
    k += 1
    option = next((o for o in spec[1].get("options", []) if o["key"] == key), None)
    for sub, subspec in ((option or {}).get("inputs", {}).get("required", {}) or {}).items():
        target = sub if sub in flat else f"{name}.{sub}"
        if subspec[0] == DYNAMIC_COMBO:
            k = _dynamic_values(target, subspec, values, k, flat, inputs)
        elif is_widget(subspec):
            if k < len(values):
                inputs[target] = values[k]
            k += 1 + _extra_widget_values(subspec)
    return k


def widget_inputs(defn: dict) -> list[tuple[str, list, bool]]:
    order = defn.get("input_order", {})
    out = []
    for group in ("required", "optional"):
        specs = defn["input"].get(group, {})
        for name in order.get(group, list(specs)):
            out.append((name, specs[name], group == "optional"))
    return out


def _extra_widget_values(spec) -> int:
    opts = spec[1] if len(spec) > 1 else {}
    return 1 if opts.get("control_after_generate") else 0


def api_to_ui(prompt: dict, object_info: dict, title: str = "", models: dict | None = None) -> dict:
    """UI-format workflow for ``prompt``; ``models`` (node id -> [{name, url, directory}]) becomes the
    nodes' ``properties.models``, which the editor checks against ComfyUI's model folders on load."""
    ids = {nid: i + 1 for i, nid in enumerate(prompt)}
    depth: dict[str, int] = {}

    def d(nid):
        if nid not in depth:
            ups = [v[0] for v in prompt[nid]["inputs"].values()
                   if isinstance(v, list) and len(v) == 2 and isinstance(v[0], str)]
            depth[nid] = 1 + max((d(u) for u in ups), default=-1)
        return depth[nid]

    for nid in prompt:
        d(nid)
    nodes, links, column_y = [], [], {}
    out_links: dict[tuple[str, int], list[int]] = {}
    for nid, node in prompt.items():
        for name, value in node["inputs"].items():
            if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str):
                links.append([len(links) + 1, ids[value[0]], value[1], ids[nid], name, None])
                out_links.setdefault((value[0], value[1]), []).append(len(links))
    for order, (nid, node) in enumerate(sorted(prompt.items(), key=lambda kv: depth[kv[0]])):
        defn = object_info[node["class_type"]]
        inputs, widgets = [], []
        for name, spec, _optional in widget_inputs(defn):
            value = node["inputs"].get(name)
            linked = isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)
            if is_widget(spec) and not linked:
                widgets.append(value if name in node["inputs"] else (spec[1] or {}).get("default"))
                widgets += [None] * _extra_widget_values(spec)
            elif not is_widget(spec) or linked:
                link_id = next((lk[0] for lk in links if lk[3] == ids[nid] and lk[4] == name), None)
                entry = {"name": name, "type": spec[0] if isinstance(spec[0], str) else "COMBO", "link": link_id}
                if is_widget(spec):
                    entry["widget"] = {"name": name}
                    widgets.append(None)  # the editor keeps a value slot for a widget turned input
                    widgets += [None] * _extra_widget_values(spec)
                inputs.append(entry)
        outputs = [{"name": oname, "type": otype, "links": out_links.get((nid, k), []), "slot_index": k}
                   for k, (oname, otype) in enumerate(zip(defn["output_name"], defn["output"]))]
        col = depth[nid]
        height = 60 + 26 * (len(widgets) + len(inputs)) + PREVIEW_HEIGHT.get(node["class_type"], 0)
        y = column_y.get(col, 40)
        column_y[col] = y + height + 60
        nodes.append({"id": ids[nid], "type": node["class_type"], "pos": [40 + col * 380, y],
                      "size": [340, height], "flags": {}, "order": order,
                      "mode": 0, "inputs": inputs, "outputs": outputs,
                      "properties": {"Node name for S&R": node["class_type"],
                                     **({"models": models[nid]} if models and nid in models else {})},
                      "widgets_values": widgets,
                      **({"title": node["_meta"]["title"]} if node.get("_meta", {}).get("title") else {})})
    # links carry slot indices in the UI format
    for link in links:
        target = next(n for n in nodes if n["id"] == link[3])
        slot = next(k for k, i in enumerate(target["inputs"]) if i["name"] == link[4])
        link[4] = slot
        link[5] = target["inputs"][slot]["type"]
    return {"last_node_id": len(nodes), "last_link_id": len(links), "nodes": sorted(nodes, key=lambda n: n["id"]),
            "links": links, "groups": [], "config": {}, "extra": {"swapline": {"title": title}}, "version": 0.4}


def ui_to_api(workflow: dict, object_info: dict) -> dict:
    links = {lk[0]: lk for lk in workflow["links"]}
    prompt = {}
    for node in workflow["nodes"]:
        if node.get("mode", 0) != 0:
            continue
        defn = object_info[node["type"]]
        values = list(node.get("widgets_values") or [])
        inputs = {}
        linked = {i["name"]: i["link"] for i in node.get("inputs", []) if i.get("link") is not None}
        k = 0
        for name, spec, _optional in widget_inputs(defn):
            if name in linked:
                lk = links[linked[name]]
                inputs[name] = [str(lk[1]), lk[2]]
                if is_widget(spec) and "widget" in next(i for i in node["inputs"] if i["name"] == name):
                    k += 1 + _extra_widget_values(spec)
            elif spec[0] == DYNAMIC_COMBO:
                flat = {n for n, _, _ in widget_inputs(defn)}
                k = _dynamic_values(name, spec, values, k, flat, inputs)
            elif is_widget(spec):
                if k < len(values) and name not in inputs:
                    inputs[name] = values[k]
                k += 1 + _extra_widget_values(spec)
        prompt[str(node["id"])] = {"class_type": node["type"], "inputs": inputs}
    return prompt
