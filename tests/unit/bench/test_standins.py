"""The exact-architecture stand-ins (devtools/standins) are the published models' size: parameter
counts within 1 % of the published figures (issue 33's "done when"), each figure with its source.
FLOPs are compared where the publisher gives them (tests/unit/bench/test_gpu_check.py prints both)."""
from __future__ import annotations

import pytest

from devtools.standins import NAMES, module
from devtools.standins.count import parameters


@pytest.mark.parametrize("name", NAMES)
def test_parameter_count_matches_the_published_figure(name):
    mod = module(name)
    spec = mod.SPEC
    assert spec.name == name and spec.source and spec.inputs and spec.outputs
    n = parameters(mod.build())
    assert abs(n / spec.published_params - 1.0) <= 0.01, \
        f"{name}: {n} parameters, published {spec.published_params} ({spec.source})"


def test_published_flops_where_given_match_within_2_percent():
    from devtools.standins.count import example_inputs, flops

    for name in ("arcface_r50", "inswapper_128"):      # published per face at the model's own input size
        spec = module(name).SPEC
        f = flops(module(name).build(), example_inputs(spec))
        got = f["gmacs"] if spec.flops_convention == "MACs" else f["gflops"]
        assert abs(got / spec.published_gflops - 1.0) <= 0.02, (name, got, spec.published_gflops)
