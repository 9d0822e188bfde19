#!/usr/bin/env bash
# The main job: batch video face swap through a real ComfyUI on the shipped sample clip with the
# built-in models (nothing downloaded). Sets everything up first if needed. Results: out/demo/
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export DO_NOT_TRACK=1
exec .venv/bin/python scripts/demo.py "$@"
