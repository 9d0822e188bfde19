"""The SWAPLINE_* environment settings the pack reads, parsed in one place.

A value that is set must parse: a malformed one used to be ignored without a word
(SWAPLINE_MODEL_CACHE_MB=2GB ran with the default budget, issue 50). It is refused with the
variable, the value given and what is accepted, when the pack loads (``check_environment``) and
wherever it is read. Unset or empty means the default, as before.
"""
from __future__ import annotations

import math
import os

from .errors import SwaplineError

MODEL_CACHE_MB = "SWAPLINE_MODEL_CACHE_MB"


class SettingError(SwaplineError):
    def __init__(self, name: str, value: str, accepted: str):
        super().__init__(f"environment variable {name}={value!r} is not valid: {accepted} is accepted; "
                         f"fix or unset it (unset means the default) and restart ComfyUI")


def env_number(name: str, accepted: str, minimum: float = 0.0) -> float | None:
    """The finite number >= ``minimum`` in ``name``; None when unset or empty."""
    raw = os.environ.get(name, "")
    if not raw.strip():
        return None
    try:
        value = float(raw)      # plain decimals only: "2GB", "0x10", "1,5" are refused
    except ValueError:
        raise SettingError(name, raw, accepted) from None
    if not math.isfinite(value) or value < minimum:
        raise SettingError(name, raw, accepted)
    return value


def model_cache_mb() -> float | None:
    """The model cache's budget in MiB (``backends.cache``), or None for its default."""
    return env_number(MODEL_CACHE_MB, "a number of megabytes, 0 or more (such as 4096)")


def check_environment() -> None:
    """Parse every setting now, so a malformed one stops the pack at start-up, not mid-job."""
    model_cache_mb()
