"""Face Mask Options' ``rules_off`` input (issue 49 item 4): one optional text input names the
built-in occluder rules to switch off; an unknown name is refused before the run with the valid
names, and a prompt without the input (made before it existed) still validates and runs with
every rule on."""
from __future__ import annotations

import pytest

from devtools.inprocess import import_pack, run_async


@pytest.fixture(scope="module")
def node():
    import_pack()
    import importlib

    ext = importlib.import_module("swapline.nodes").SwaplineExtension()
    return {c.GET_SCHEMA().node_id: c for c in run_async(ext.get_node_list())}["SwaplineMaskOptions"]


def _validate(cls, **values):
    from comfy_api.internal import make_locked_method_func

    locked = make_locked_method_func(cls, "validate_inputs", cls.PREPARE_CLASS_CLONE({}))
    base = {"occlusion": "builtin (skin colour, no model)", "parser": "off", "regions": "skin", "areas": ""}
    return locked(**{**base, **values})


def test_unknown_rule_is_refused_with_the_valid_names(node):
    from swapline_core.masks import rules

    res = _validate(node, rules_off="wires, eyebrows")
    assert isinstance(res, str) and "eyebrows" in res and all(n in res for n in rules.NAMES), res
    assert _validate(node, rules_off="wires, glare") is True
    assert _validate(node, rules_off="") is True
    assert _validate(node) is True                       # left out: every rule on
    assert _validate(node, rules_off=None) is True       # linked: judged when the node runs


def test_the_input_reaches_the_options_and_its_tooltip_lists_every_rule(node):
    from swapline_core.masks import rules

    spec = {i.id: i for i in node.GET_SCHEMA().inputs}["rules_off"]
    assert spec.optional and spec.default == ""
    assert all(n in spec.tooltip for n in rules.NAMES)
    base = dict(occlusion="builtin (skin colour, no model)", occlusion_sensitivity=1.0, parser="off",
                regions="skin", areas="", mouth="auto", mouth_size=0.08, mouth_feather=0.12, mouth_lower_lip=0.0,
                erode=0.0, blur=0.02, temporal=2)
    assert node.execute(**base).result[0].rules_off == ()
    assert node.execute(**base, rules_off="Glare; wires").result[0].rules_off == ("wires", "glare")
