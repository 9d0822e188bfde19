"""``GET /swapline/metrics`` on ComfyUI's own server: this process's Swapline counters in
Prometheus text format (per-stage times, frames, QA outcomes, stage-cache hits/misses), so one
server is observable without the farm. A route on the server ComfyUI already runs; the pack opens
no socket and makes no request of its own. The counters live in ``swapline_core.metrics``.
"""
from __future__ import annotations

import logging

from ..swapline_core import metrics as core_metrics

log = logging.getLogger("swapline")
ROUTE = "/swapline/metrics"
_REGISTERED = False


async def handle_metrics(request):
    from aiohttp import web  # ComfyUI's server library, present wherever a route can be served

    return web.Response(body=core_metrics.exposition(), headers={"Content-Type": core_metrics.CONTENT_TYPE_LATEST})


def register() -> bool:
    """Add the route once, while ComfyUI loads custom nodes (before it builds its app from
    ``PromptServer.instance.routes``). Outside a running server (unit tests) it does nothing."""
    global _REGISTERED
    if _REGISTERED:
        return True
    try:
        from server import PromptServer
    except ImportError:  # imported outside a ComfyUI server
        return False
    if getattr(PromptServer, "instance", None) is None:
        return False
    PromptServer.instance.routes.get(ROUTE)(handle_metrics)
    _REGISTERED = True
    if not core_metrics.pack_metrics().available:
        log.warning("[Swapline] %s serves no metrics: prometheus-client is not installed (requirements.txt)", ROUTE)
    return True
