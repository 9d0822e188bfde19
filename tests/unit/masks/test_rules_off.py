"""A skin-sample rule that switches itself off says so (issue 50, item 6).

``beside.not_background`` (the background past a turned cheek) keeps every sample when it would
drop half or more: on an unusual face. Right, but it was silent; now it notes the switch-off
(``rules_off``), and each face's ``masks`` record carries it as ``skin_rules_off``: {rule: why}
and under ``masks.rules.beside.off`` (how a note reaches the face record, on the texture rule:
tests/unit/masks/test_rules.py).
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from test_beside import _face  # noqa: E402

from swapline_core.masks import beside, rules_off  # noqa: E402


def test_not_background_notes_when_it_keeps_everything():
    lab, disc, nose, lm = _face((120, 125, 40))                         # olive leaves around a skin disc
    few = disc.copy()
    few[50:80, 96:101] = True                                           # a few samples past the silhouette
    with rules_off.collecting() as notes:
        assert not beside.not_background(lab, few, nose, lm).all()
    assert notes == {}
    most = nose.copy()
    most[50:80, 101:118] = True                                         # most samples on the leaves
    with rules_off.collecting() as notes:
        assert beside.not_background(lab, most, nose, lm).all()
    assert "beside.not_background" in notes and "none dropped" in notes["beside.not_background"], notes

