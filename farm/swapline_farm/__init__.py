"""swapline-farm: Swapline batch jobs over many ComfyUI workers on Ray.

A job (clip + source face(s) + API workflow + settings) is cut into frame-range chunks; each chunk
runs as an API prompt on one ComfyUI worker (a Ray actor owning one ComfyUI process); chunk
outputs go to a content-addressed store, are stitched by stream copy, and the whole clip is
QA-checked and signed once on the coordinator.
"""
from __future__ import annotations

import sys
from pathlib import Path

__version__ = "0.1.0"

# The farm ships inside the Swapline repository and imports its core (never the ComfyUI nodes).
_REPO = Path(__file__).resolve().parents[2]
if (_REPO / "swapline_core").is_dir() and str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

PACK_DIR = _REPO if (_REPO / "nodes").is_dir() and (_REPO / "__init__.py").is_file() else None
