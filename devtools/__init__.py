"""Development tooling shared by tests/, bench/ and scripts/: the real-ComfyUI harness, the
in-process ComfyUI setup, the synthetic model builders and the offline media locator.

Never imported by the pack (swapline_core/, nodes/): tests/unit/test_architecture.py checks it.
Paths (the repo, .comfy/ComfyUI, tests/.cache) are computed from this package's location.
"""
