#!/usr/bin/env bash
# GPU check (issue 33): exact-size stand-ins timed per model at batch 1/8/32, and the shipped video
# workflow end to end at 720p and 1080p (swap only, + GFPGAN, QA every frame) through a real
# ComfyUI on the GPU; writes out/bench/gpu_check/{gpu_check.json,gpu.md} (--doc: docs/measurements/gpu.md).
#
#   scripts/gpu_check.sh [--doc]                 on a machine with an NVIDIA GPU (nvidia-smi works)
#   scripts/gpu_check.sh --cpu-fallback [--doc]  anywhere: tiny batches and clip, the code path only (CI)
#
# GPU mode provisions what it needs: .venv + ComfyUI 0.3.75 (scripts/setup.sh; torch's PyPI wheels
# carry CUDA), then .venv-gpu, an overlay venv on .venv holding onnxruntime-gpu, so the CPU
# onnxruntime the tests use is left alone (the two wheels overwrite each other in one venv).
# Other arguments go to python -m bench.gpu_check (e.g. --models inswapper_128,gfpgan_v1_4 --no-e2e).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=gpu
for a in "$@"; do [ "$a" = --cpu-fallback ] && mode=cpu; done
if [ "$mode" = gpu ] && ! nvidia-smi >/dev/null 2>&1; then
  echo "gpu_check: no NVIDIA GPU here (nvidia-smi failed); running the CPU fallback" >&2
  mode=cpu
  set -- --cpu-fallback "$@"
fi
export DO_NOT_TRACK=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
[ -x .venv/bin/python ] && [ -f .comfy/ComfyUI/main.py ] || scripts/setup.sh
PY=.venv/bin/python
if [ "$mode" = gpu ]; then
  VGPU=.venv-gpu
  if [ ! -x "$VGPU/bin/python" ]; then
    "$(readlink -f .venv/bin/python)" -m venv "$VGPU"
  fi
  base_site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  gpu_site=$("$VGPU/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  printf '%s\n' "$base_site" >"$gpu_site/_swapline_base_venv.pth"   # .venv's packages after our own
  if ! "$VGPU/bin/python" -c 'import onnxruntime as o, sys; sys.exit("CUDAExecutionProvider" not in o.get_available_providers())' 2>/dev/null; then
    ort=$(.venv/bin/python -c 'import onnxruntime; print(onnxruntime.__version__)')
    "$VGPU/bin/python" -m pip install -q --disable-pip-version-check "onnxruntime-gpu==$ort" ||
      "$VGPU/bin/python" -m pip install -q --disable-pip-version-check onnxruntime-gpu
  fi
  PY=$VGPU/bin/python
fi
exec "$PY" -m bench.gpu_check "$@"
