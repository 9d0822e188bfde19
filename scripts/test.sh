#!/usr/bin/env bash
# Run Swapline's whole test suite (sets everything up first if needed).
# Unit tests cover the core; integration tests drive a real ComfyUI 0.3.75 server over
# HTTP/WebSocket with the pack in custom_nodes. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export DO_NOT_TRACK=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
.venv/bin/ruff check .                  # lint first: config in pyproject.toml [tool.ruff]
.venv/bin/python scripts/validate_pack.py
exec .venv/bin/python -m pytest tests "$@"
