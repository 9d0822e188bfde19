"""Entry point: ``python -m bench.run [--smoke] [--quick] [--skip-SECTION ...] [--SECTION ...]``.

Runs every registered section (bench/section.py ``MODULES``) through the one protocol and writes
out/bench/results.json and out/bench/results.md, rewritten after every section, so an interrupted
run keeps what it measured (marked incomplete). A complete full run then writes each section's
docs/measurements page. ``--smoke`` runs every section on its smoke inputs
(tests/unit/bench/test_bench_smoke.py runs it in CI); its numbers mean nothing and never reach
docs/measurements. A step that fails is recorded under ``errors`` and the run goes on; the exit
status is non-zero only then, never because a target was missed.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
import traceback

from . import section
from .machine import load_average
from .paths import OUT, WORK

_T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[bench {time.perf_counter() - _T0:7.1f}s] {msg}", flush=True)


def parse(argv=None, sections: dict | None = None) -> argparse.Namespace:
    sections = sections or section.registry()
    ap = argparse.ArgumentParser(prog="scripts/bench.sh", description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true",
                    help="every section on its smoke inputs, seconds each (CI); results only, docs untouched")
    ap.add_argument("--quick", action="store_true", help="each section's --quick inputs (no 3000-frame server run)")
    for s in sections.values():
        flag = s.name.replace("_", "-")
        if s.opt_in:
            ap.add_argument(f"--{flag}", action="store_true", help=f"also run: {s.title}")
        else:
            ap.add_argument(f"--skip-{flag}", action="store_true", help=f"skip: {s.title}")
    return ap.parse_args(argv)


def chosen(args, sections: dict) -> list:
    return [s for s in sections.values()
            if (getattr(args, s.name) if s.opt_in else not getattr(args, f"skip_{s.name}"))]


def markdown(results: dict) -> str:
    """results.md: the stamp once, then each section as its page has it (target table, body)."""
    lines = ["# Swapline benchmark results", ""]
    if not results.get("complete"):
        lines += ["**Incomplete run** (interrupted or still running).", ""]
    lines += section.stamp_lines(results["run"]) + [f"- Total: {results.get('seconds_total')} s", ""]
    sections = section.registry()
    for name, rec in results["sections"].items():
        s = sections[name]
        lines += [f"# {s.title}", "", "## Targets", "", *section.target_table(rec["targets"]), "",
                  *s.body(rec["data"]), ""]
    for k, e in results["errors"].items():
        lines += [f"- **{k}**:", "", "```", e.strip(), "```"]
    return "\n".join(lines) + "\n"


def _error(exc: BaseException) -> str:
    log(f"ERROR: {type(exc).__name__}: {exc}")
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()[-4000:] + \
        "\n" + "".join(traceback.format_tb(exc.__traceback__)[-3:])


def main(argv=None) -> int:
    sections = section.registry()
    args = parse(argv, sections)
    OUT.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(WORK, ignore_errors=True)
    todo = chosen(args, sections)
    results = {"run": section.stamp(), "settings": {"smoke": args.smoke, "quick": args.quick,
                                                   "sections": [s.name for s in todo]},
               "sections": {}, "errors": {}, "complete": False}

    def save() -> None:
        results["seconds_total"] = round(time.perf_counter() - _T0, 1)
        results["run"]["machine"]["load_average_at_end"] = load_average()
        (OUT / "results.json").write_text(json.dumps(results, indent=1, default=str))
        (OUT / "results.md").write_text(markdown(results))

    m = results["run"]["machine"]
    log(f"machine: {m['cpu_count']} CPUs, load {m['load_average_at_start']}; sections: "
        + ", ".join(s.name for s in todo))
    if args.smoke:
        log("smoke check: tiny inputs, numbers are not measurements (docs/measurements untouched)")
    for s in todo:
        log(f"{s.name}: {s.title}")
        try:
            rec = section.execute(s, s.quick if args.quick else None, smoke=args.smoke, log=log)
        except Exception as exc:  # noqa: BLE001 - one broken section must not cost the others' numbers
            results["errors"][s.name] = _error(exc)
        else:
            results["sections"][s.name] = rec
            results["errors"].update({f"{s.name} {k}": v for k, v in (rec["data"].get("errors") or {}).items()})
            log(f"{s.name}: " + ("; ".join(f"{t['figure']} {section.f(t['measured'])} {t['target']} met "
                                           f"{section.f(t['met'])}" for t in rec["targets"]) or "no targets")
                + f" ({rec['seconds']} s)")
        save()
    results["complete"] = True
    save()
    shutil.rmtree(WORK, ignore_errors=True)
    log(f"wrote {OUT / 'results.json'} and {OUT / 'results.md'}")
    if not args.smoke:      # only a complete full run updates the docs
        for name, rec in results["sections"].items():
            log(f"wrote {section.write(sections[name], rec, results['run'])}")
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
