"""The README's first command as a newcomer meets it: time, disk and memory of `scripts/demo.sh`
in a fresh clone of HEAD with nothing beside it and nothing provisioned (the whole setup runs:
torch, ComfyUI 0.3.75, the locked requirements), then of a second run (setup only checks stamps).

Writes docs/measurements/first_run.md; the README's requirements line quotes it. Takes ~10 min
and ~7.5 GB of disk in a temporary folder (deleted afterwards).

    python -m bench.first_run [--keep DIR]
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .paths import REPO
from .section import Section, execute, stamp, table, write


def du(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            p = Path(root) / f
            if not p.is_symlink():
                total += p.stat().st_size
    return total


def timed_demo(clone: Path) -> dict:
    """One `scripts/demo.sh` run: wall seconds, seconds per setup step, the demo's own seconds."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWAPLINE_")}
    steps, t0, last = {}, time.time(), None
    proc = subprocess.Popen(["scripts/demo.sh"], cwd=clone, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    tail = []
    for line in proc.stdout:
        tail = (tail + [line])[-40:]
        if line.startswith("[setup] ") or line.startswith("[demo] starting"):
            now = time.time()
            if last:
                steps[last[0]] = round(steps.get(last[0], 0) + now - last[1], 1)
            last = (line.strip(), now)
    if proc.wait() != 0:
        raise SystemExit("scripts/demo.sh failed:\n" + "".join(tail))
    wall = time.time() - t0
    demo = next((float(m.group(1)) for m in map(re.compile(r"\[demo\] done in ([\d.]+) s").search, tail) if m), None)
    return {"wall_s": round(wall, 1), "demo_s": demo, "steps_s": steps}


def run(keep: Path | None = None) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="swapline-first-run-")) if keep is None else keep
    try:
        clone = tmp / "clone"                # tmp holds the clone and nothing else
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True,
                                text=True).stdout.strip()
        first = timed_demo(clone)
        disk = {name: round(du(clone / name) / 2**30, 2) for name in (".venv", ".comfy")}
        second = timed_demo(clone)
        # RUSAGE_CHILDREN keeps the largest waited-for descendant over both runs (the ComfyUI server)
        peak = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
        return {"commit": commit, "first": first, "second": second, "disk_gib": disk, "peak_rss_mb": peak}
    finally:
        if keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


def body(result: dict) -> list[str]:
    f, s, d = result["first"], result["second"], result["disk_gib"]
    return [f"Clone of commit {result['commit']}.", "",
            *table(["", "first run", "second run"], [["wall time", f"{f['wall_s']} s", f"{s['wall_s']} s"],
                                                     ["of which the demo's job", f"{f['demo_s']} s",
                                                      f"{s['demo_s']} s"]]),
            "", f"Peak RSS of one process over both runs: {result['peak_rss_mb']} MB. "
            f"Disk after the first run: `.venv` {d['.venv']} GiB, `.comfy` {d['.comfy']} GiB.", "",
            "Setup steps of the first run (seconds until the next step began):", "",
            *[f"- {k[len('[setup] '):] if k.startswith('[setup] ') else k}: {v} s" for k, v in f["steps_s"].items()]]


# Not a bench.run section (~10 min, a fresh clone and setup): this module's main runs it.
SECTION = Section(
    name="first_run", title="First run: scripts/demo.sh in a fresh clone",
    about="A clone of HEAD in an empty temporary folder (no `../shared`, no `SWAPLINE_*` variables), nothing "
          "provisioned, then `scripts/demo.sh` twice. Peak memory is the largest single process (the ComfyUI "
          "server). On a loaded machine the times are upper bounds.",
    run=lambda keep=None, log=print: run(Path(keep) if keep else None), body=body, full={}, smoke={},
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", type=Path, help="run in this (empty) folder and keep it")
    args = ap.parse_args()
    rec = execute(SECTION, {"keep": str(args.keep) if args.keep else None})
    print(rec["data"])
    print(f"wrote {write(SECTION, rec, stamp('python -m bench.first_run'))}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
