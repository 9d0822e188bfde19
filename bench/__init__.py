"""Swapline benchmarks (not tests): ``scripts/bench.sh`` -> ``out/bench/results.{json,md}``.

Every number in a results file comes from one run on one machine, and every ratio compares two
things measured in that same run. See bench/README.md for what is measured and how.
"""
