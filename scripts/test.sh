#!/usr/bin/env bash
# Run Swapline's tests on both ComfyUI versions CI supports (sets everything up first if needed):
#   ComfyUI 0.3.75 (.comfy/ComfyUI, .venv):        the whole suite, then swapline-farm's (farm/tests:
#       a real local Ray with real ComfyUI 0.3.75 workers)
#   ComfyUI 0.33.0 (.comfy/ComfyUI-0.33, .venv-0.33): integration and browser tests, plus the unit
#       tests that import ComfyUI itself (tests/inprocess.py); the rest of the unit tests never
#       touch ComfyUI, so a second run of them would test nothing new. Tests marked "once"
#       (pytest.ini: the pack's own paths, e.g. resume after a kill, each swapper family, install
#       paths) run in the 0.3.75 pass only.
# Unit tests cover the core; integration tests drive a real ComfyUI server over HTTP/WebSocket with
# the pack in custom_nodes. Extra arguments go to pytest (both runs).
# SWAPLINE_TEST_COMFY=0.3.75 or 0.33 runs one version only; SWAPLINE_COMFYUI + a matching Python
# run the suite against any other ComfyUI tree (docs/development.md, "Testing against another ComfyUI tree").
set -euo pipefail
cd "$(dirname "$0")/.."
which=${SWAPLINE_TEST_COMFY:-both}
case "$which" in both | 0.3.75 | 0.33) ;; *) echo "SWAPLINE_TEST_COMFY must be both, 0.3.75 or 0.33" >&2; exit 2 ;; esac
scripts/setup.sh --tests
export DO_NOT_TRACK=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
unset SWAPLINE_COMFYUI
.venv/bin/ruff check .                  # lint first: config in pyproject.toml [tool.ruff]
.venv/bin/python scripts/validate_pack.py

rc=0
if [ "$which" != 0.33 ]; then
  echo "=== ComfyUI 0.3.75: whole suite ==="
  start=$SECONDS
  .venv/bin/python -m pytest tests "$@" || rc=$?
  echo "=== ComfyUI 0.3.75: pytest exit $rc, $((SECONDS - start)) s ==="
  # a second pytest run: farm/tests has its own conftest (Ray, workers) that must not mix with tests/
  echo "=== swapline-farm: farm/tests on ComfyUI 0.3.75 workers ==="
  start=$SECONDS
  rcf=0
  .venv/bin/python -m pytest farm/tests "$@" || rcf=$?
  echo "=== swapline-farm: pytest exit $rcf, $((SECONDS - start)) s ==="
  [ "$rc" != 0 ] || rc=$rcf
fi
if [ "$which" != 0.3.75 ]; then
  if [ ! -x .venv-0.33/bin/python ] || [ ! -f .comfy/ComfyUI-0.33/main.py ]; then
    echo "ComfyUI 0.33 is not provisioned (SWAPLINE_SKIP_COMFY_033=1?): run scripts/setup.sh --tests without it" >&2
    exit 1
  fi
  mapfile -t inproc < <(grep -rlE "^from devtools\.(inprocess|comfy_harness) import" tests/unit | sort)
  echo "=== ComfyUI 0.33.0: integration, browser and ${#inproc[@]} in-process unit test files ==="
  start=$SECONDS
  rc33=0
  # tests marked "once" (pytest.ini) ran in the 0.3.75 pass: their subject does not depend on ComfyUI's version
  SWAPLINE_COMFYUI=.comfy/ComfyUI-0.33 .venv-0.33/bin/python -m pytest tests/integration tests/browser \
    "${inproc[@]}" -m "not once" "$@" || rc33=$?
  echo "=== ComfyUI 0.33.0: pytest exit $rc33, $((SECONDS - start)) s ==="
  [ "$rc" != 0 ] || rc=$rc33
fi
exit "$rc"
