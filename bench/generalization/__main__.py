"""python -m bench.generalization [--smoke] [--doc] [--frames N] [--clips A,B] [--sources A,B] [--publish-only]"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import run, write_doc


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Issue 30's development set through the shipped workflow.")
    ap.add_argument("--smoke", action="store_true", help="one tiny clip x one source (CI)")
    ap.add_argument("--doc", action="store_true", help="write docs/measurements/generalization.md")
    ap.add_argument("--frames", type=int, help="frames per clip (default: the section's)")
    ap.add_argument("--clips", help="comma-separated clip names (default: the whole set)")
    ap.add_argument("--sources", help="comma-separated source names (default: all)")
    ap.add_argument("--publish-only", action="store_true",
                    help="only remake the README's development-set picture from the last full run's result.json")
    args = ap.parse_args(argv)
    from ..paths import OUT

    if args.publish_only:
        from .report import publish

        res = json.loads((OUT / "generalization" / "result.json").read_text())
        print(f"wrote {publish(res, Path(res['strips']))}")
        return 0
    if args.doc and (args.smoke or args.clips or args.sources or args.frames):
        ap.error("--doc records the whole set only (no --smoke, --clips, --sources or --frames)")
    split = (lambda s: [x.strip() for x in s.split(",") if x.strip()] if s else None)
    res = run(args.smoke, frames=args.frames, clips=split(args.clips), sources=split(args.sources))
    # measurements.stamp names scripts/bench.sh unless it knows the module; this is the module alone
    res["run"]["command"] = " ".join(["python -m bench.generalization", *(argv if argv is not None else sys.argv[1:])])
    (OUT / "generalization").mkdir(parents=True, exist_ok=True)
    path = OUT / "generalization" / ("smoke.json" if args.smoke else "result.json")
    path.write_text(json.dumps(res, indent=1, default=str))
    print(f"generalization: {json.dumps(res['summary'])}\nresult: {path}")
    if args.doc:
        print(write_doc(res))
        from .report import publish

        print(publish(res, Path(res["strips"])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
