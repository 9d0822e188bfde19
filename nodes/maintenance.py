"""Retention and job tracking in ComfyUI: every Swapline node runs bound to its job (the prompt
id), the cache is swept at server start and after each job's output node, and a maintenance
node reports and reclaims the cache. The logic is in swapline_core.provenance (jobs, retention,
delete); this module only supplies ComfyUI's folders and the current prompt id."""
from __future__ import annotations

import functools
import inspect
import json
import logging
import os
import time

import folder_paths
from comfy_api.latest import io, ui
from typing_extensions import override

from ..swapline_core.provenance import jobs, retention
from ..swapline_core.provenance.delete import Places
from . import model_paths
from .types import CATEGORY

log = logging.getLogger("swapline")


def places() -> Places:
    return Places(folder_paths.get_output_directory(), model_paths.swapline_cache_dir(),
                  model_paths.folders(model_paths.FACE_MODELS))


def policy() -> retention.Policy:
    return retention.load_policy(folder_paths.get_user_directory())


def reset_comfy_cache() -> None:
    """Removed chunks may be what ComfyUI's node cache still points at: have the next prompt start
    with a fresh cache (the /free route's flag), so it recomputes instead of reading a gone chunk."""
    try:
        from server import PromptServer

        PromptServer.instance.prompt_queue.set_flag("free_memory", True)
    except Exception:  # no server (tests importing the pack): there is no node cache to reset
        pass


def sweep(reclaim_all: bool = False) -> dict:
    p, pol = places(), policy()
    result = retention.sweep_cache(p.cache_root, p.output_dir, pol, reclaim_all=reclaim_all)
    result.update(retention.sweep_outputs(p, pol))
    if result["removed"] or result["deleted_jobs"]:
        reset_comfy_cache()
    return result


def sweep_at_start() -> None:
    try:
        r = sweep()
        log.info("[Swapline] retention: removed %d cache entries (%d bytes), %d jobs",
                 len(r["removed"]), r["freed_bytes"], len(r["deleted_jobs"]))
    except Exception as exc:  # a bad policy file must not stop the pack from loading; nothing is deleted
        log.error("[Swapline] retention sweep skipped: %s: %s", type(exc).__name__, exc)


def _job_context() -> jobs.JobContext | None:
    from comfy_execution.utils import get_executing_context

    ctx = get_executing_context()
    if ctx is None or not ctx.prompt_id:
        return None
    return jobs.context_for(ctx.prompt_id, folder_paths.get_output_directory(), model_paths.swapline_cache_dir())


def _ui_outputs(out) -> list[str]:
    """Files under the output folder that a node's UI result names (saved images/videos, QA
    reports, signed files): what the job wrote, found without changing each node."""
    found: list[str] = []
    data = getattr(out, "ui", None)
    data = data.as_dict() if hasattr(data, "as_dict") else data

    def walk(v):
        if isinstance(v, dict):
            if isinstance(v.get("filename"), str) and v.get("type") == "output":
                found.append(os.path.join(v.get("subfolder") or "", v["filename"]))
            for k in ("file", "report_file"):
                if isinstance(v.get(k), str):
                    found.append(v[k])
            for x in v.values():
                walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    walk(data)
    root = os.path.realpath(folder_paths.get_output_directory())
    return [rel for rel in dict.fromkeys(found)
            if os.path.isfile(os.path.join(root, rel)) and not os.path.isabs(rel)]


def _record(ctx, kwargs, out) -> None:
    if ctx is None:
        return
    with jobs.bound(ctx):
        jobs.note_sources(kwargs.values())
        for rel in _ui_outputs(out):
            jobs.note_output(rel)


def _after(ctx, is_output: bool) -> None:
    if ctx is not None and is_output:
        try:
            sweep()
        except Exception as exc:  # the job's result is already written: report, do not fail it
            log.error("[Swapline] retention sweep after job %s failed: %s: %s", ctx.job_id, type(exc).__name__, exc)


def bind_job(node_cls) -> None:
    """Run ``node_cls.execute`` bound to its prompt's job (idempotent)."""
    func = node_cls.execute.__func__
    if getattr(func, "_swapline_job_bound", False):
        return
    is_output = bool(node_cls.define_schema().is_output_node) and node_cls is not CacheStatus
    if inspect.iscoroutinefunction(func):
        async def execute(cls, *args, **kwargs):
            ctx = _job_context()
            with jobs.bound(ctx):
                out = await func(cls, *args, **kwargs)
            _record(ctx, kwargs, out)
            _after(ctx, is_output)
            return out
    else:
        def execute(cls, *args, **kwargs):
            ctx = _job_context()
            with jobs.bound(ctx):
                out = func(cls, *args, **kwargs)
            _record(ctx, kwargs, out)
            _after(ctx, is_output)
            return out
    functools.update_wrapper(execute, func)
    execute._swapline_job_bound = True
    node_cls.execute = classmethod(execute)


class CacheStatus(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineCacheStatus",
            display_name="Cache Status / Reclaim (Swapline)",
            category=f"{CATEGORY}/maintenance",
            description="Reports the size of Swapline's stage cache (output/swapline_cache) and the retention "
                        "policy (user/swapline/retention.json). 'apply policy' removes what the policy says is "
                        "too old or too much; 'reclaim unused' removes every cache entry no job holds a lease "
                        "on and nothing modified in the last min_idle_minutes. Chunks a running or recent job "
                        "uses are never removed.",
            inputs=[io.Combo.Input("action", options=["report", "apply policy", "reclaim unused"], default="report",
                                   tooltip="What to do: only report, or remove entries.")],
            outputs=[io.String.Output(display_name="report")],
            is_output_node=True,
        )

    @classmethod
    @override
    def fingerprint_inputs(cls, action):
        return time.time()     # the cache changes between runs: never reuse an old report

    @classmethod
    @override
    def execute(cls, action) -> io.NodeOutput:
        result = {}
        if action != "report":
            result = sweep(reclaim_all=action == "reclaim unused")
        p = places()
        report = {"cache": retention.cache_report(p.cache_root, p.output_dir, policy()), **result}
        text = json.dumps(report, indent=1)
        return io.NodeOutput(text, ui=ui.PreviewText(text))
