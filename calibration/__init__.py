"""Tuning tools: what chose a limit, a table or a rule, on the development set (the clips the
project is tuned on). Apart from ``bench/`` on purpose: bench measures, these tune, and a figure
is never measured with the tool that tuned it. Each module says what it chose and where it wrote
it (docs/measurements/, swapline_core/qa/thresholds.json, ...)."""
