"""The built-in occluder's rules, one registry: a name, why the rule exists, an on/off switch and a
per-face count in the swap report.

Why: the rules grew clip by clip (skin model, hue, beside the face, glasses, wires, texture,
glare) and were merged by max/OR in ``builtin``; nobody could say which rule kept which pixels
of a face, switch one off to see what it does, or tell which rules the labelled faces need
(issue 49). Every rule of the built-in occluder is listed here; ``MaskOptions.rules_off`` names
the ones switched off (an unknown name is refused with the list of valid ones), ``builtin``
runs the others, and each face's ``masks`` record holds ``rules``: per rule its count (in the
rule's ``unit``) and, where it switched itself off on that face, why. Rules overlap (a glasses
frame is far from the skin's colour too), so the counts do not add up to the cut.

Adding a rule: a ``Rule`` entry below and, in ``builtin``, a step that runs it where
``enabled(off, name)`` and records its count with ``count``. A rule that finds its own pixels at
full resolution (as ``wires`` does) keeps them through ``builtin.keep_pixels``, called per face
from ``refine_masks`` beside ``keep_wires``: that is the slot for ``hands`` (``masks/hands.py``'s
hand regions over a face, cropped to the face's patch), with a ``Rule("hands", ...)`` entry here.

Not in the registry: the mouth interior (a part of its own with the ``mouth`` option), temporal
smoothing (the ``temporal`` option) and the XSeg / BiSeNet models (their own inputs).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import SwaplineError


@dataclass(frozen=True)
class Rule:
    name: str
    why: str          # one line: what it catches that the others do not
    unit: str         # what its per-face count counts
    where: str        # the module that implements it


KEPT = "px kept"
RULES: tuple[Rule, ...] = (
    Rule("skin", "what the target's own skin colours (cheeks and nose, two tones) cannot explain and that reaches "
                 "out of the eyes, brows, nostrils and lips: hair, hands, microphones, sunglasses", KEPT, "occlusion"),
    Rule("redder", "under red light shaded skin is as red as a red object: saturated pixels redder than any skin "
                   "sample (not on the lips)", KEPT, "occlusion.redder_than_skin"),
    Rule("off_hue", "colours skin never has (sky, foliage, blue or green objects), which the colour model reads as "
                    "a pale skin tone", KEPT, "chroma.off_hue"),
    Rule("texture", "busy texture above the brows (hats, headbands, hair) of a skin-like colour", KEPT, "texture"),
    Rule("glasses", "a chromatic frame closed around an eye is kept; the see-through lens inside it is swapped "
                    "and tinted like the target's", KEPT, "glasses"),
    Rule("wires", "thin lines over the eyes (wire and rimless frames, bridge, temples), too thin for the colour "
                  "tests", KEPT, "wires"),
    Rule("rims", "a rim (any colour) closed round an eye on one ellipse: it and the lens it holds keep the "
                 "target's pixels (thin metal frames on tinted lenses, which neither colour nor wires see)",
         KEPT, "rims"),
    Rule("glare", "a bright blob whose edge fades in like light is sunlit skin, not an object: swapped",
         "px released", "occlusion._glare"),
    Rule("beside", "skin samples that match the background beside a turned face are not fitted as skin",
         "samples dropped", "beside.not_background"),
    Rule("hands", "a hand over the face has the face's own skin colour, so the colour rules swap it: MediaPipe's "
                  "palm detector and hand landmarks near the face box find it (the bernini and bird clips)",
         KEPT, "hands"),
)
NAMES: tuple[str, ...] = tuple(r.name for r in RULES)
BY_NAME = {r.name: r for r in RULES}
# the sample rule's own switch-off note (``rules_off.note``) by rule name
NOTE_OF = {"beside.not_background": "beside"}


def parse_off(names: str | Iterable[str] | None) -> tuple[str, ...]:
    """Rule names to switch off, from a comma list (a node widget) or names; validated, in
    registry order. An unknown name is refused with the valid ones."""
    if names is None:
        return ()
    if not isinstance(names, (str, list, tuple, set, frozenset)):
        raise SwaplineError(f"occluder rules to switch off must be text (comma separated names), got {names!r}; "
                            f"the rules are: {', '.join(NAMES)}")
    items = names.replace(";", ",").split(",") if isinstance(names, str) else list(names)
    items = [str(t).strip().lower() for t in items if str(t).strip()]
    bad = [t for t in items if t not in BY_NAME]
    if bad:
        raise SwaplineError(f"unknown occluder rule(s) {bad}; the rules are: {', '.join(NAMES)} (comma separated, "
                            "or empty for all on)")
    return tuple(n for n in NAMES if n in items)


def enabled(off: Iterable[str], name: str) -> bool:
    return name not in off


def record(off: Iterable[str]) -> dict:
    """A face's ``rules`` record before anything is counted: every rule at 0, disabled ones marked."""
    off = set(off)
    return {r.name: ({"disabled": True} if r.name in off else {"count": 0}) for r in RULES}


def count(rec: dict, name: str, n: int | float) -> None:
    """Add ``n`` to a rule's count in a face's ``rules`` record (a disabled rule counts nothing)."""
    entry = rec.get(name)
    if entry is not None and "count" in entry:
        entry["count"] += int(round(n))


def switched_off(rec: dict, name: str, why: str) -> None:
    entry = rec.get(name)
    if entry is not None and "count" in entry:
        entry["off"] = why


def describe() -> str:
    """The rules, one line each, for a node tooltip and the docs."""
    return "; ".join(f"{r.name}: {r.why}" for r in RULES)
