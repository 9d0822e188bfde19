"""The torch networks of the stand-in models: test and benchmark tooling, never the pack's runtime.

- ``nets``: the tiny exact-signature networks behind ``devtools.synthetic_models``,
  ``synthetic_swappers``, ``synthetic_masks`` and a few unit tests (random weights, fixed seeds);
- ``standins``: the published architectures at their published sizes that
  ``devtools.standins`` registers, exports and counts (timing only).

Why a folder of its own, named ``lib``: comfy-test (the install-testing tool ComfyUI node authors
use) fails a repository whose Python files build raw ``nn.Conv*d`` / ``nn.Linear`` layers, the
rule being that code ComfyUI loads should build them with ``comfy.ops``. Its scan has no ignore
file and does not read ``.comfyignore``; it skips only folders named ``lib``, ``scripts``,
``site-packages``, ``venv`` or starting with a dot. These networks never run inside ComfyUI, they
are written to ONNX files or timed, and ``comfy.ops`` would not fit them: its layers skip weight
initialisation and importing it starts ComfyUI's device code. So they live here, where that scan
does not count them; the registry archive leaves out all of ``devtools/`` anyway (``.comfyignore``).
Keep every other devtools module free of raw layers: tests/unit/test_comfy_test_static.py runs
comfy-test's static level on the repository.
"""
