"""Swapline's ComfyUI extension: collects the node classes of each capability module.

A capability whose backend fails to import (say dlib is missing) is logged in one line and
left out; the other nodes still load.
"""
from __future__ import annotations

import importlib
import logging

from comfy_api.latest import ComfyExtension, io
from typing_extensions import override

from ..swapline_core import settings
from . import metrics_route, model_paths, prompt_guard, validation

log = logging.getLogger("swapline")

MODULES = {
    "analysis": ("AnalyzerLoader", "DetectFaces", "SelectFaces", "AlignFaces", "PasteFaces"),
    "face_model": ("BuildFaceModel", "SaveFaceModel", "LoadFaceModel"),
    "swap": ("SwapperLoader", "SwapFaces"),
    "masks": ("MaskOptionsNode",),
    "video": ("LoadVideo", "TrackFaces", "SwapFrames", "SaveVideo", "FramesToImage", "ImageToFrames"),
    "video_io": ("VideoToFrames", "FramesToVideo"),
    "frames_trim": ("TrimFrames",),
    "qa": ("QAGate", "SafetyClassifierLoader"),
    "qa_limits": ("QALimitOverrides",),
    "provenance": ("C2PASink",),
    "restore": ("RestorerLoader", "RestoreFaces", "RestoreFrames"),
    "vae": ("TiledVAEEncode",),
    "controlnet": ("FaceHint", "ApplyFaceControlNet"),
    "refine": ("RefineFrames",),
    "maintenance": ("CacheStatus",),
}


def register_metrics_route() -> None:
    try:
        metrics_route.register()  # GET /swapline/metrics; a no-op outside a running server
    except Exception as exc:  # noqa: BLE001 - observability must not take the nodes down
        log.error("[Swapline] %s route not added: %s: %s", metrics_route.ROUTE, type(exc).__name__, exc)


class SwaplineExtension(ComfyExtension):
    @override
    async def on_load(self) -> None:
        settings.check_environment()  # a malformed SWAPLINE_* setting refuses the pack, not a job later
        model_paths.register()
        prompt_guard.register()  # a sink with invalid settings rejects the whole prompt
        register_metrics_route()

    @override
    async def get_node_list(self) -> list[type[io.ComfyNode]]:
        settings.check_environment()  # here too: ComfyUI 0.3.75 never calls on_load
        model_paths.register()
        prompt_guard.register()  # here too: ComfyUI 0.3.75 never calls on_load
        register_metrics_route()
        nodes: list[type[io.ComfyNode]] = []
        for module, names in MODULES.items():
            try:
                mod = importlib.import_module(f".{module}", __name__)
                nodes.extend(getattr(mod, n) for n in names)
            except Exception as exc:  # one broken optional backend must not take every node down
                log.error("[Swapline] %s nodes disabled: %s: %s", module, type(exc).__name__, exc)
        for node in nodes:  # here, so combos other modules add later are covered without their help
            validation.install(node)
        _retention(nodes)
        return nodes


_swept = False


def _retention(nodes) -> None:
    """Bind every node to its job (job index, cache leases), add the deletion routes when a
    server runs, and apply the retention policy once per server start. Guarded: without it the
    nodes still work, only unrecorded."""
    global _swept
    try:
        from . import maintenance, retention_routes

        for node in nodes:
            maintenance.bind_job(node)
        # only with a server: a pack imported by tests or tools must not sweep anyone's output folder
        if retention_routes.register() and not _swept:
            _swept = True
            maintenance.sweep_at_start()
    except Exception as exc:
        log.error("[Swapline] retention/deletion disabled: %s: %s", type(exc).__name__, exc)
