#!/usr/bin/env bash
# Benchmarks (not tests): speed of our streaming video path vs a naive per-frame baseline, and
# peak memory of a real ComfyUI server on a long vs a short clip, and the tiled VAE encode
# against core VAEEncode / VAEEncodeTiled at 1920x1080, and (section `farm`) the same batch through
# swapline-farm with 1 vs 2 local ComfyUI workers. Sets everything up first if
# needed. Results: out/bench/results.json and out/bench/results.md (see bench/README.md).
#   scripts/bench.sh            full run (includes a 3000-frame 1280x720 clip through ComfyUI)
#   scripts/bench.sh --quick    everything except the 3000-frame run
#   scripts/bench.sh --smoke    every section on tiny inputs, seconds each: checks the code paths, not
#                               speed (CI runs it: tests/unit/bench/test_bench_smoke.py); docs untouched
#   scripts/bench.sh --skip-rss / --skip-speed / --skip-server-job / --skip-quality / --skip-tiled-vae /
#                    --skip-farm / --skip-generalization   (the development set: docs/measurements/generalization.md)
#                    / --skip-qa-agreement   (the gate against faces labelled by eye: docs/measurements/qa_agreement.md)
#   python -m bench.farm [--smoke]   the farm section alone (docs/measurements/farm.md)
#   python -m bench.server_job [--doc]   the shipped job, QA every frame (docs/measurements/server_job.md)
#   scripts/bench.sh --soak      adds the soak: 220 mixed prompts on one server with sweeps, deletes and
#                                interrupts (python -m bench.soak [--smoke] [--doc]: docs/measurements/soak.md)
set -euo pipefail
cd "$(dirname "$0")/.."
# the test clips and swapline-farm (the farm section) come with the tests' setup; ComfyUI 0.33 is not needed
SWAPLINE_TEST_COMFY=0.3.75 scripts/setup.sh --tests
export DO_NOT_TRACK=1
exec .venv/bin/python -m bench.run "$@"
