"""bench/instrument.py + bench/probe.py: a timed function that is not there, or that the run never
calls, is an error naming it, not a stage table that silently lost its time (issue 31: the speed
section patched swapline_core.backends.inswapper.warp_crops after the core split had moved it)."""
from __future__ import annotations

import types

import pytest

from bench.instrument import StaleTargetError, Target, check_called
from bench.probe import Probe


def _module():
    mod = types.ModuleType("fake_core")
    mod.work = lambda x: x + 1
    return mod


def test_missing_name_is_a_clear_error_and_nothing_stays_patched():
    mod = _module()
    original = mod.work
    probe = Probe()
    with pytest.raises(StaleTargetError, match=r"fake_core\.warp_crops \(align\).*moved or renamed"):
        with probe.patch([Target(mod, "work", "swap"), Target(mod, "warp_crops", "align")]):
            pass
    assert mod.work is original


def test_calls_are_counted_per_target_and_timed_per_label():
    mod = _module()
    probe = Probe()
    items = [Target(mod, "work", "swap")]
    with probe.patch(items):
        assert mod.work(1) == 2
        mod.work(2)
    assert probe.target_calls == {"fake_core.work": 2}
    assert probe.calls["swap"] == 2 and probe.seconds["swap"] >= 0 and probe.cpu["swap"] >= 0
    check_called(items, probe.target_calls)


def test_required_target_never_called_is_an_error():
    mod = _module()
    probe = Probe()
    items = [Target(mod, "work", "paste"), Target(mod, "work", "store", required=False)]
    with probe.patch(items[:1]):
        pass
    with pytest.raises(StaleTargetError, match=r"during the speed run nothing called fake_core\.work \(paste\)"):
        check_called(items, probe.target_calls)
    check_called(items[1:], probe.target_calls)     # optional: fine


def test_speed_targets_name_functions_the_core_has():
    """Owners and names of every target, for both kinds of setup, exist now."""
    from bench import instrument
    from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
    from swapline_core.backends.classical import ClassicalSwapper
    from swapline_core.backends.insightface_pack import InsightFaceAnalyzer
    from swapline_core.backends.inswapper import InSwapper

    # bare instances (no model loading): targets() only reads class facts and attributes
    neural = InSwapper.__new__(InSwapper)
    neural.session = types.SimpleNamespace(run=lambda *a: None)
    insight = InsightFaceAnalyzer.__new__(InsightFaceAnalyzer)
    insight.landmarker = None
    for analyzer, swapper in ((BuiltinAnalyzer.__new__(BuiltinAnalyzer), ClassicalSwapper.__new__(ClassicalSwapper)),
                              (insight, neural)):
        case = types.SimpleNamespace(analyzer=analyzer, swapper=swapper)
        items = instrument.targets(case)
        instrument.check_exists(items)
        assert {t.label for t in items} >= {"decode", "detect", "swap", "encode", "masks", "guards"}
