"""All or nothing for prompts that end in a Swapline sink.

ComfyUI validates each output node of a prompt on its own and runs the valid ones. A job whose
sink has an out-of-range crf was accepted, its QA gate (or a preview) ran and reported success,
and no MP4 was written; the only trace was node_errors in the /prompt answer (issue 18). Before
validation, this prompt handler checks every Swapline node's own settings the way core would;
when one is invalid it narrows the prompt's execution targets to the output nodes that are or
depend on it, so core rejects the whole prompt with its usual node_errors and nothing runs.
"""
from __future__ import annotations

import logging

log = logging.getLogger("swapline")
_REGISTERED = False


def _widget_problem(name: str, value, kind, info: dict) -> str | None:
    try:
        if kind == "INT":
            value = int(value)
        elif kind == "FLOAT":
            value = float(value)
    except (TypeError, ValueError):
        return f"input '{name}' must be a {kind}, got {value!r}"
    if kind in ("INT", "FLOAT"):
        if "min" in info and value < info["min"]:
            return f"input '{name}' is {value}, below its minimum {info['min']}"
        if "max" in info and value > info["max"]:
            return f"input '{name}' is {value}, above its maximum {info['max']}"
    options = kind if isinstance(kind, list) else info.get("options") if kind == "COMBO" else None
    if options is not None and value not in options:
        return f"input '{name}' got {value!r}, not one of its choices"
    return None


def node_problems(node: dict, node_cls, classes: dict) -> list[str]:
    """What core's validation of this one node (not its inputs' nodes) would reject."""
    spec = node_cls.INPUT_TYPES()
    inputs = node.get("inputs", {})
    problems = []
    for category in ("required", "optional"):
        for name, entry in spec.get(category, {}).items():
            kind, info = entry[0], (entry[1] if len(entry) > 1 and isinstance(entry[1], dict) else {})
            if name not in inputs:
                if category == "required":
                    problems.append(f"required input '{name}' is missing")
                continue
            value = inputs[name]
            if isinstance(value, list):  # a link: the producing node's type must fit
                src = classes.get(value[0]) if len(value) == 2 else None
                types = getattr(src, "RETURN_TYPES", None) if src is not None else None
                if not types or not isinstance(value[1], int) or value[1] >= len(types):
                    problems.append(f"input '{name}' is linked to a missing node output {value}")
                elif isinstance(kind, str) and kind not in ("*", "COMBO") and types[value[1]] not in ("*", kind):
                    problems.append(f"input '{name}' needs {kind} but is linked to a {types[value[1]]} output")
                continue
            why = _widget_problem(name, value, kind, info)
            if why:
                problems.append(why)
    if not problems and "validate_inputs" in getattr(node_cls, "__dict__", {}):
        # the node's own check (Swapline's generated one needs no class state); links are None
        import inspect

        args = inspect.getfullargspec(node_cls.validate_inputs).args[1:]
        res = node_cls.validate_inputs(**{a: None if isinstance(inputs.get(a), list) else inputs.get(a)
                                          for a in args if a in inputs})
        if isinstance(res, str):
            problems.append(res)
    return problems


def invalid_sinks(prompt: dict, mapping: dict) -> dict[str, list[str]]:
    """Output nodes of ``prompt`` that are, or depend on, a Swapline node whose own settings core
    would reject: a bad Frames to VIDEO in front of core's Save Video must stop the whole job too,
    not only a bad Swapline sink."""
    classes = {nid: mapping.get(n.get("class_type")) for nid, n in prompt.items() if isinstance(n, dict)}
    bad = {}
    for nid, node in prompt.items():
        cls = classes.get(nid)
        if cls is None or not str(node.get("class_type", "")).startswith("Swapline"):
            continue
        try:
            problems = node_problems(node, cls, classes)
        except Exception as exc:  # noqa: BLE001 - a guard must never break queuing; core validates anyway
            log.warning("[Swapline] prompt guard skipped node %s: %s", nid, exc)
            continue
        if problems:
            bad[nid] = problems
    if not bad:
        return {}
    users: dict[str, set] = {}
    for nid, node in prompt.items():
        for v in (node.get("inputs", {}) if isinstance(node, dict) else {}).values():
            if isinstance(v, list) and len(v) == 2 and isinstance(v[0], str):
                users.setdefault(v[0], set()).add(nid)
    targets: dict[str, list[str]] = {}
    for nid, problems in bad.items():
        todo, seen = [nid], set()
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            if getattr(classes.get(n), "OUTPUT_NODE", False) is True:
                targets.setdefault(n, []).extend(problems)
            todo.extend(users.get(n, ()))
    return targets


def on_prompt(json_data: dict) -> dict:
    prompt = json_data.get("prompt")
    if not isinstance(prompt, dict):
        return json_data
    import nodes as comfy_nodes  # ComfyUI's nodes.py (the server process has no other `nodes`)

    bad = invalid_sinks(prompt, comfy_nodes.NODE_CLASS_MAPPINGS)
    targets = json_data.get("partial_execution_targets")
    if targets is not None:
        bad = {k: v for k, v in bad.items() if k in targets}
    if bad:
        log.error("[Swapline] rejecting the whole prompt: sink settings invalid: %s", bad)
        json_data["partial_execution_targets"] = sorted(bad)
    return json_data


def register() -> None:
    global _REGISTERED
    if _REGISTERED:
        return
    try:
        from server import PromptServer
    except ImportError:  # imported outside a ComfyUI server (unit tests)
        return
    if getattr(PromptServer, "instance", None) is None:
        return
    PromptServer.instance.add_on_prompt_handler(on_prompt)
    _REGISTERED = True
