"""A malformed SWAPLINE_* setting is refused, not ignored (issue 50): SWAPLINE_MODEL_CACHE_MB=2GB
ran with the default budget without a word. Refused when the pack loads and when it is read, with
the variable, the value and what is accepted; unset, empty and valid values still work."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import pytest

from swapline_core import settings
from swapline_core.backends import cache
from swapline_core.errors import SwaplineError

VAR = "SWAPLINE_MODEL_CACHE_MB"


@pytest.mark.parametrize("value", ["2GB", "abc", "-1", "nan", "inf", "1e400", "0x10", "1,5"])
def test_a_malformed_model_cache_budget_is_refused(monkeypatch, value):
    monkeypatch.setenv(VAR, value)
    for check in (settings.check_environment, cache.budget_bytes):
        with pytest.raises(SwaplineError) as err:
            check()
        msg = str(err.value)
        assert VAR in msg and repr(value) in msg and "megabytes" in msg, msg


@pytest.mark.parametrize("value,mb", [("512", 512), (" 0.5 ", 0.5), ("0", 0), ("1e3", 1000)])
def test_a_valid_model_cache_budget_is_used(monkeypatch, value, mb):
    monkeypatch.setenv(VAR, value)
    settings.check_environment()
    assert cache.budget_bytes() == int(mb * (1 << 20))


@pytest.mark.parametrize("value", [None, "", "  "])
def test_an_unset_model_cache_budget_means_the_default(monkeypatch, value):
    if value is None:
        monkeypatch.delenv(VAR, raising=False)
    else:
        monkeypatch.setenv(VAR, value)
    settings.check_environment()
    assert cache.budget_bytes() >= cache.MIN_BUDGET
