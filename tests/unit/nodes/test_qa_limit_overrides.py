"""The QA gate reads as a few choices; single limits live on QA Limit Overrides (issue 48, item 5).

The gate shows policy, limit set, sampling and its flags; the limits it used to show as a dozen
widgets at -1 are on a separate node linked to its 'limits' input. API prompts written before the
fold still pass those limits to the gate itself: the gate reads them from the prompt for one
release, refuses what core's range checks refused then, and refuses a limit given both ways.
"""
from __future__ import annotations

from dataclasses import fields

import pytest

from devtools.inprocess import import_pack, run_async

GATE, OVERRIDES = "SwaplineQAGate", "SwaplineQALimitOverrides"


@pytest.fixture(scope="module")
def pack():
    import_pack()
    import importlib

    from comfy_api.latest import io

    ext = importlib.import_module("swapline.nodes").SwaplineExtension()
    classes = {c.GET_SCHEMA().node_id: c for c in run_async(ext.get_node_list())}
    return io, classes, importlib.import_module("swapline.nodes.qa_limits")


def _call_like_core(cls, values: dict):
    import inspect

    from comfy_api.internal import first_real_override, make_locked_method_func

    spec = inspect.getfullargspec(first_real_override(cls, "validate_inputs"))
    locked = make_locked_method_func(cls, "validate_inputs", cls.PREPARE_CLASS_CLONE({}))
    return locked(**{k: v for k, v in values.items() if k in spec.args})


def test_the_gate_shows_a_few_choices_and_every_input_has_a_tooltip(pack):
    io, classes, _ = pack
    gate = classes[GATE].GET_SCHEMA()
    widgets = [i.id for i in gate.inputs if isinstance(i, io.WidgetInput)]
    # a widget added later goes last: saved workflows' widget values keep their places
    assert widgets == ["policy", "limit_set", "sample_every", "require_redetection", "allow_no_face",
                       "filename_prefix", "max_safety_score", "fail_on_source_warning"]
    limits = next(i for i in gate.inputs if i.id == "limits")
    assert limits.get_io_type() == "SWAPLINE_QA_LIMITS" and limits.optional
    limit_set = next(i for i in gate.inputs if i.id == "limit_set")
    from swapline.swapline_core.qa import decide

    assert limit_set.options == [decide.AUTO_LIMIT_SET, *decide.LIMIT_SETS]
    assert limit_set.default == decide.DEFAULT_LIMIT_SET
    over = classes[OVERRIDES].GET_SCHEMA()
    assert [o.get_io_type() for o in over.outputs] == ["SWAPLINE_QA_LIMITS"]
    assert over.category == gate.category and over.display_name.startswith("QA Limit Overrides")
    for schema in (gate, over):
        for inp in schema.inputs:
            assert inp.tooltip and len(inp.tooltip) > 20, (schema.node_id, inp.id)


def test_overrides_cover_the_old_gate_limits_and_name_real_thresholds(pack):
    io, classes, ql = pack
    from swapline.swapline_core.qa.decide import QAThresholds

    over = classes[OVERRIDES].GET_SCHEMA()
    names = [i.id for i in over.inputs]
    assert set(ql.LEGACY) <= set(names) and {"max_blotch", "max_detail_ratio"} <= set(names)
    assert set(names) <= {f.name for f in fields(QAThresholds)}
    for inp in over.inputs:
        assert isinstance(inp, io.Float.Input) and inp.default == -1.0 and inp.min <= -1.0, inp.id


def test_overrides_node_outputs_only_the_limits_it_sets(pack):
    _, classes, ql = pack
    values = {name: -1.0 for name in ql.SPECS}
    values.update(max_seam_ratio=1.4, min_identity=0.5)
    out = classes[OVERRIDES].execute(**values)
    assert out.result[0] == {"max_seam_ratio": 1.4, "min_identity": 0.5}
    assert classes[OVERRIDES].execute(**{name: -1.0 for name in ql.SPECS}).result[0] == {}


def test_overrides_check_refuses_a_negative_limit_on_a_non_negative_metric(pack):
    _, classes, ql = pack
    cls = classes[OVERRIDES]
    values = {name: -1.0 for name in ql.SPECS}
    assert _call_like_core(cls, values) is True
    assert _call_like_core(cls, {**values, "min_identity": -0.5, "max_seam_ratio": 2.0}) is True
    res = _call_like_core(cls, {**values, "max_seam_ratio": -0.5})
    assert isinstance(res, str) and "'max_seam_ratio' is -0.5" in res and "give -1" in res, res
    res = _call_like_core(cls, {**values, "max_bleed": 3.0})
    assert isinstance(res, str) and "'max_bleed' is 3" in res and "to 1" in res, res
    values.pop("max_offface")
    res = _call_like_core(cls, values)
    assert isinstance(res, str) and "needs its 'max_offface' input" in res, res


def test_an_old_prompt_passes_limits_to_the_gate_itself(pack):
    _, _, ql = pack
    prompt = {"10": {"class_type": GATE, "inputs": {"policy": "keep original", "min_identity": 0.999,
                                                     "max_leakage": -1.0, "max_seam_ratio": 2}}}
    assert ql.legacy_limits(prompt, "10", "QA Gate") == {"min_identity": 0.999, "max_seam_ratio": 2.0}
    assert ql.legacy_limits(prompt, "11", "QA Gate") == {}
    assert ql.legacy_limits(None, None, "QA Gate") == {}
    # out of range: what core's range check of the old widget refused
    prompt["10"]["inputs"]["max_offface"] = 9.0
    with pytest.raises(ValueError, match="'max_offface' is 9: give -1"):
        ql.legacy_limits(prompt, "10", "QA Gate")
    # linked: its value does not reach the gate any more
    prompt["10"]["inputs"]["max_offface"] = ["3", 0]
    with pytest.raises(ValueError, match="link a QA Limit Overrides node"):
        ql.legacy_limits(prompt, "10", "QA Gate")


def test_a_limit_given_both_ways_is_refused_unless_equal(pack):
    _, _, ql = pack
    assert ql.merge({"max_bleed": 0.01}, {"min_identity": 0.5}, "QA Gate") == {"max_bleed": 0.01, "min_identity": 0.5}
    assert ql.merge({"max_bleed": 0.01}, {"max_bleed": 0.01}, "QA Gate") == {"max_bleed": 0.01}
    assert ql.merge(None, {}, "QA Gate") == {}
    with pytest.raises(ValueError, match="got 'max_bleed' twice"):
        ql.merge({"max_bleed": 0.01}, {"max_bleed": 0.02}, "QA Gate")


def test_overrides_reach_the_thresholds_over_the_chosen_set(pack):
    _, _, _ = pack
    from swapline.nodes import qa
    from swapline.swapline_core.qa import decide

    class Analyzer:
        recognizer_name = "dlib_resnet_v1"

    strict = "viewer-labelled (strict)"
    th = qa.thresholds_for(Analyzer(), strict, max_seam_ratio=2.5, require_redetection=False)
    base = decide.limit_set(strict)
    assert th.max_seam_ratio == 2.5 and th.max_offface == base.max_offface and th.require_redetection is False
