"""python -m bench.generalization [--smoke] [--doc] [--set frames=N] [--set 'clips=["A"]'] [--publish-only]

The section alone through the common protocol (bench/section.py ``cli``); with --doc (the whole set
only) also the README's development-set picture, which --publish-only remakes from the last run."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..paths import OUT
from ..section import cli
from .report import publish
from .section import SECTION


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--publish-only" not in argv:
        if "--doc" in argv and "--set" in argv:
            raise SystemExit("--doc records the whole set only (no --set)")
        rc = cli(SECTION, argv, module="bench.generalization")
        if rc or "--doc" not in argv:
            return rc
    data = json.loads((OUT / "generalization.json").read_text())["data"]
    print(f"wrote {publish(data, Path(data['strips']))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
