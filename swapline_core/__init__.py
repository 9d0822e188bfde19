"""Swapline core: face analysis, swapping, video streaming and provenance.

Imports nothing from ComfyUI so it can be tested and reused on its own; the ComfyUI nodes in
``nodes/`` are thin adapters over it. Modules import their heavy dependencies lazily.
"""
__version__ = "0.2.0"
