"""Swapline: production batch video face swapping for ComfyUI.

Kept tiny on purpose: ComfyUI imports this at startup, so nothing heavy is imported here; the
node modules load their backends lazily (see nodes/__init__.py).
"""
WEB_DIRECTORY = "./web"


async def comfy_entrypoint():
    from .nodes import SwaplineExtension

    return SwaplineExtension()
