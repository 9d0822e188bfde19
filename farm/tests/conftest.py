"""Farm tests: the repository root (swapline_core, devtools) and farm/ (swapline_farm) on sys.path."""
from __future__ import annotations

import sys
from pathlib import Path

FARM = Path(__file__).resolve().parent.parent
REPO = FARM.parent
for p in (str(FARM), str(REPO)):
    if p not in sys.path:
        sys.path.insert(0, p)
