"""HTTP routes on ComfyUI's own server for retention and data-subject deletion.

GET  /swapline/cache            cache size and the retention policy
POST /swapline/cache/sweep      {"reclaim_all": false}: apply the policy (or remove every unleased entry)
POST /swapline/jobs/delete      {"job_id" | "source_sha256" | "face_model", "requested_by", "request_id"}

Like every ComfyUI route these are open to whoever can reach the server: expose ComfyUI only
behind the access control you already need for /prompt. The logic is in
swapline_core.provenance.delete; errors come back as {"error": text} with 400/404/409 (the job is
queued or running)/500 (the disk refused; the same request again resumes).
"""
from __future__ import annotations

import asyncio
import logging
import os

from ..swapline_core.errors import SwaplineError
from ..swapline_core.provenance import delete as core_delete
from ..swapline_core.provenance import jobs, retention
from . import maintenance
from .model_paths import public_text

log = logging.getLogger("swapline")
_registered = False


def register() -> bool:
    """Add the routes to ComfyUI's server; False (and nothing done) when there is no server, e.g.
    when the pack is imported by tests or tools."""
    global _registered
    if _registered:
        return True
    try:
        from server import PromptServer

        routes = PromptServer.instance.routes
    except Exception:
        return False
    from aiohttp import web

    def reply(data, status=200):
        return web.json_response(data, status=status)

    def failure(exc: Exception):
        if isinstance(exc, OSError):           # the disk refused: say what and where, as JSON
            what = f"{exc.strerror or exc} ({os.path.basename(str(exc.filename or ''))})"
            return reply({"error": public_text(f"the server could not complete it: {what}; nothing more was "
                                               "removed, send the same request again once fixed")}, 500)
        status = (404 if isinstance(exc, core_delete.UnknownJobError) else
                  409 if isinstance(exc, core_delete.JobRunningError) else
                  500 if isinstance(exc, core_delete.DeletionIncompleteError) else 400)
        return reply({"error": public_text(str(exc))}, status)

    def queued_or_running() -> set[str]:
        # a prompt is a job from queueing to its last output (items are (number, prompt_id, ...))
        running, pending = PromptServer.instance.prompt_queue.get_current_queue_volatile()
        return {str(item[1]) for item in list(running) + list(pending)}

    jobs.set_queue_probe(queued_or_running)

    async def in_thread(fn, *args, **kwargs):
        return await asyncio.get_running_loop().run_in_executor(None, lambda: fn(*args, **kwargs))

    @routes.get("/swapline/cache")
    async def cache_status(request):
        try:
            p = maintenance.places()
            return reply(await in_thread(retention.cache_report, p.cache_root, p.output_dir, maintenance.policy()))
        except (SwaplineError, OSError) as exc:
            return failure(exc)

    @routes.post("/swapline/cache/sweep")
    async def cache_sweep(request):
        body = await _json(request)
        if not isinstance(body, dict):
            return reply({"error": "send a JSON object, e.g. {\"reclaim_all\": false}"}, 400)
        try:
            return reply(await in_thread(maintenance.sweep, reclaim_all=bool(body.get("reclaim_all"))))
        except (SwaplineError, OSError) as exc:
            return failure(exc)

    @routes.post("/swapline/jobs/delete")
    async def delete_job(request):
        body = await _json(request)
        keys = [k for k in ("job_id", "source_sha256", "face_model") if isinstance(body, dict) and body.get(k)]
        if len(keys) != 1 or not isinstance(body.get(keys[0]), str):
            return reply({"error": "send a JSON object with exactly one of job_id, source_sha256, face_model "
                                   "(text), plus requested_by and optionally request_id"}, 400)
        kw = {"requested_by": str(body.get("requested_by") or ""), "request_id": body.get("request_id"),
              "reason": str(body.get("reason") or "data-subject request")}
        if not kw["requested_by"]:
            return reply({"error": "requested_by is required: who asked for the deletion goes into the tombstone"}, 400)
        fn = {"job_id": core_delete.delete_job, "source_sha256": core_delete.delete_by_source,
              "face_model": core_delete.delete_by_face_model}[keys[0]]
        try:
            result = await in_thread(fn, maintenance.places(), body[keys[0]], **kw)
        except (SwaplineError, OSError) as exc:
            return failure(exc)
        maintenance.reset_comfy_cache()
        log.info("[Swapline] deleted by request %s (%s): %s", kw["request_id"], kw["requested_by"], keys[0])
        return reply(result)

    _registered = True
    return True


async def _json(request):
    try:
        return await request.json()
    except Exception:
        return None
