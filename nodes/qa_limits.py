"""QA Limit Overrides: the QA gate's individual limits, folded out of the gate into a node of their own.

The gate reads as a few choices (policy, limit set, sampling); a studio that needs one limit
stricter or looser than the chosen set links this node to the gate's 'limits' input. ComfyUI
0.3.75 has no per-input "advanced" flag to fold widgets away, so a separate node is the portable
fold. API prompts written before the fold pass the limits to the gate itself: the gate reads
those from the prompt (``legacy_limits``) for one more release and logs that they moved here.
"""
from __future__ import annotations

import logging

from comfy_api.latest import io
from typing_extensions import override

from .absent import ABSENT, missing
from .types import CATEGORY, QALimits

log = logging.getLogger("swapline")

AUTO = -1.0  # a limit left at -1 keeps the limit set's value
NODE_ID = "SwaplineQALimitOverrides"
TITLE = "QA Limit Overrides"
# name -> (lowest real value, highest, widget step, what it limits). -1 stands for "the set's value",
# so a limit whose real range starts at -1 (a correlation, a similarity) cannot be set to exactly -1.
SPECS: dict[str, tuple[float, float, float, str]] = {
    "min_identity": (-1.0, 1.0, 0.01, "Minimum similarity of the swapped face to the source."),
    "max_leakage": (-1.0, 1.0, 0.01, "Maximum similarity of the swapped face to the original target face."),
    "max_landmark_drift": (0.0, 5.0, 0.01, "Maximum keypoint drift in inter-ocular distances."),
    "max_flicker_ratio": (0.0, 50.0, 0.1, "Maximum face-region flicker relative to the input clip."),
    "max_mouth_delta": (0.0, 1.0, 0.005, "Maximum difference of mouth opening to the target's, in jaw widths."),
    "min_expression_corr": (-1.0, 1.0, 0.05,
                            "Minimum correlation of the result's mouth movement with the target's over a sliding "
                            "window (brightness of the mouth region, row by row, at the target's mouth; a frozen "
                            "mouth scores ~0; windows where the target's mouth does not move are not judged)."),
    "max_occluder_overwrite": (0.0, 1.0, 0.01,
                               "Maximum share of the target's occluder pixels (glasses, hands) changed."),
    "max_colour_cast": (0.0, 100.0, 0.5,
                        "Maximum colour shift (CIELAB a*, b*) of the face skin against the target's, on the "
                        "worse face half."),
    "max_seam_ratio": (0.0, 20.0, 0.05, "Maximum edge energy on the paste boundary relative to the target."),
    "max_bleed": (0.0, 1.0, 0.005, "Maximum share of face skin turned into a foreign colour."),
    "max_offface": (0.0, 5.0, 0.01, "Maximum changed area outside the target's face, in face areas."),
    "max_blotch": (0.0, 255.0, 0.5,
                   "Maximum spread (95th - 5th percentile) of the smoothed lightness change over the face's "
                   "skin: a smudge or bright patch reads high, an even colour match low."),
    "max_chroma_blotch": (0.0, 255.0, 0.5,
                          "Maximum spread of the smoothed colour change (CIELAB a*, b*) over the face's skin, "
                          "away from one even shift (95th percentile): a yellow or pink patch reads high, an even "
                          "colour match low."),
    "max_detail_ratio": (0.0, 20.0, 0.05,
                         "Maximum fine detail of the result over the target's (pasted stubble, stripes, edges "
                         "read high)."),
    "max_texture_excess": (0.0, 20.0, 0.05,
                           "Maximum fine detail of the result over the target's where on the face's skin it is "
                           "worst (95th percentile of the local ratio): a patch of pasted stubble or specks on a "
                           "smooth cheek reads high."),
    "min_coverage": (0.0, 1.0, 0.01, "The job fails when a tracked face is swapped in fewer of its frames."),
}
# The limits the gate itself took before the fold: still read from old API prompts for one release.
LEGACY = ("min_identity", "max_leakage", "max_landmark_drift", "max_flicker_ratio", "max_mouth_delta",
          "min_expression_corr", "max_occluder_overwrite", "max_colour_cast", "max_seam_ratio", "max_bleed",
          "max_offface", "min_coverage")


def check_limit(owner: str, name: str, value) -> str | None:
    """Why ``value`` is not a usable ``name`` limit (None when it is; -1 and None always are)."""
    if value is None or value is ABSENT:
        return None
    lo, hi, _, _ = SPECS[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{owner}'s '{name}' must be a number, got {value!r}"
    if float(value) == AUTO:
        return None
    if not lo <= float(value) <= hi:
        low = f"above {lo:g}" if lo == AUTO else f"from {lo:g}"
        return (f"{owner}'s '{name}' is {value:g}: give -1 (the limit set's value) or a limit {low} "
                f"to {hi:g} (docs/qa.md#thresholds)")
    return None


def given(values: dict) -> dict[str, float]:
    """The limits actually set (not -1) in ``values``, as floats."""
    return {k: float(v) for k, v in values.items() if k in SPECS and v is not None and float(v) != AUTO}


def legacy_limits(prompt: dict | None, node_id: str | None, gate_title: str) -> dict[str, float]:
    """Limits an API prompt written before the fold passes to the gate itself (ComfyUI drops inputs a
    node does not declare, so they are read from the prompt). Refuses what core's checks refused then."""
    node = (prompt or {}).get(str(node_id)) if node_id is not None else None
    inputs = node.get("inputs", {}) if isinstance(node, dict) else {}
    old = {k: inputs[k] for k in LEGACY if k in inputs}
    for name, value in old.items():
        if isinstance(value, list):
            raise ValueError(f"{gate_title}'s '{name}' input is linked; the gate has no such input any more: "
                             f"link a {TITLE} node (its '{name}') to the gate's 'limits' input instead")
        why = check_limit(gate_title, name, value)
        if why:
            raise ValueError(why)
    out = given(old)
    if out:
        log.warning("[Swapline] %s got limit inputs %s; these moved to the %s node (link it to the gate's "
                    "'limits' input). They are honoured in this release only.", gate_title,
                    ", ".join(sorted(out)), TITLE)
    return out


def merge(overrides: dict | None, legacy: dict[str, float], gate_title: str) -> dict[str, float]:
    """The overrides node's limits and an old prompt's; the same limit given two different ways is refused."""
    out = dict(overrides or {})
    for name, value in legacy.items():
        if name in out and out[name] != value:
            raise ValueError(f"{gate_title} got '{name}' twice: {value:g} as its own (old) input and "
                             f"{out[name]:g} from {TITLE}; remove the gate's own '{name}' input")
        out[name] = value
    return out


class QALimitOverrides(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id=NODE_ID,
            display_name=f"{TITLE} (Swapline)",
            category=f"{CATEGORY}/qa",
            description="Individual QA limits that override the QA gate's limit set; link 'limits' to the gate's "
                        "'limits' input. A limit left at -1 keeps the value of the gate's limit_set (for the "
                        "analyzer's recognizer). What each limit measures and how the sets were chosen: "
                        "docs/qa.md#thresholds.",
            inputs=[io.Float.Input(name, default=AUTO, min=min(lo, AUTO), max=hi, step=step,
                                   tooltip=f"{text} -1: the limit set's value.")
                    for name, (lo, hi, step, text) in SPECS.items()],
            outputs=[QALimits.Output(display_name="limits")],
        )

    @classmethod
    @override
    def validate_inputs(cls, min_identity=ABSENT, max_leakage=ABSENT, max_landmark_drift=ABSENT,
                        max_flicker_ratio=ABSENT, max_mouth_delta=ABSENT, min_expression_corr=ABSENT,
                        max_occluder_overwrite=ABSENT, max_colour_cast=ABSENT, max_seam_ratio=ABSENT,
                        max_bleed=ABSENT, max_offface=ABSENT, max_blotch=ABSENT, max_chroma_blotch=ABSENT,
                        max_detail_ratio=ABSENT,
                        max_texture_excess=ABSENT, min_coverage=ABSENT):
        # core's min of -1 lets any value down to -1 through; a negative limit on a non-negative metric
        # (say max_seam_ratio -0.5) would fail every face, so only -1 itself means "unset"
        values = {name: value for name, value in locals().items() if name in SPECS}
        gap = missing(cls, values, {name: "a limit, or -1 for the limit set's value" for name in SPECS})
        if gap is not None:
            return gap
        for name in SPECS:
            why = check_limit(TITLE, name, values[name])
            if why:
                return why
        return True

    @classmethod
    @override
    def execute(cls, **limits) -> io.NodeOutput:
        return io.NodeOutput(given(limits))
