#!/usr/bin/env bash
# Benchmarks (not tests): every section registered in bench/section.py (speed, rss, server_job,
# quality, tiled_vae, farm, generalization, qa_agreement; soak and gpu_check on request) through one
# protocol, each page of docs/measurements written by one writer. Sets everything up first if needed.
# Results: out/bench/results.json and out/bench/results.md (see bench/README.md).
#   scripts/bench.sh            full run (includes a 3000-frame 1280x720 clip through ComfyUI)
#   scripts/bench.sh --quick    each section's quick inputs (no 3000-frame run)
#   scripts/bench.sh --smoke    every section on its smoke inputs, seconds each: checks the code paths, not
#                               speed (CI runs it: tests/unit/bench/test_bench_smoke.py); docs untouched
#   scripts/bench.sh --skip-NAME ...   leave a section out (--skip-speed, --skip-rss, --skip-server-job, ...)
#   scripts/bench.sh --soak / --gpu-check   add an opt-in section
#   python -m bench.NAME [--smoke] [--doc] [--set KEY=JSON]   one section alone (farm, server_job, soak,
#                               tiled_vae; python -m bench.generalization; scripts/gpu_check.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
# the test clips and swapline-farm (the farm section) come with the tests' setup; ComfyUI 0.33 is not needed
SWAPLINE_TEST_COMFY=0.3.75 scripts/setup.sh --tests
export DO_NOT_TRACK=1
exec .venv/bin/python -m bench.run "$@"
