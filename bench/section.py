"""One protocol for every benchmark section, and the one writer of docs/measurements/*.md.

A section is a ``Section``: its name (the key in results.json, ``--skip-NAME`` of bench.run, and
its page ``docs/measurements/NAME.md`` unless ``page`` says otherwise), what it measures, its
smoke and full inputs, its targets, a ``run`` that takes those inputs and returns the section's
data (rows and figures, JSON), ``figures`` that reads the targeted figures from that data and a
``body`` that renders the data as markdown. ``execute`` runs one section and checks its targets
(here and nowhere else); ``page`` makes its measurements page: title, the stamp (command, date,
machine, git commit), the target table (target, measured, met), then the body. A new section is
one module with a ``SECTION`` and a line in ``MODULES``.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import json
import operator
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .paths import OUT, REPO

DOCS = REPO / "docs" / "measurements"
# Every section, in the order bench.run goes through them.
MODULES = ("bench.speed", "bench.rss", "bench.server_job", "bench.quality.run", "bench.tiled_vae", "bench.farm",
           "bench.generalization.section", "bench.qa_labels.report", "bench.soak", "bench.gpu_check")
OPS = {">=": operator.ge, "<=": operator.le, "==": operator.eq}


@dataclass(frozen=True)
class Target:
    figure: str                 # a key of what the section's ``figures`` returns
    op: str                     # ">=", "<=" or "=="
    limit: float
    what: str = ""              # how the figure is made, one line
    unjudged: Callable[[dict], str | None] | None = None    # data -> why this run cannot judge it

    def check(self, value, data: dict) -> dict:
        why = self.unjudged(data) if self.unjudged else None
        met = None if why or value is None else bool(OPS[self.op](value, self.limit))
        return {"figure": self.figure, "target": f"{self.op} {self.limit:g}", "measured": value, "met": met,
                "note": why or ("not measured" if value is None else ""), "what": self.what}


@dataclass(frozen=True)
class Section:
    name: str
    title: str
    about: str | Callable[[dict], str]      # the paragraph under the title (method: the module docstring)
    run: Callable[..., dict]                 # run(log=..., **inputs) -> the section's data
    smoke: dict                              # inputs of ``--smoke``: tiny, every code path, seconds
    full: dict                               # inputs of a real run
    targets: tuple[Target, ...] = ()
    figures: Callable[[dict], dict] = dict   # data -> {figure: measured value}
    body: Callable[[dict], list[str]] = lambda data: []
    page: str = ""                           # file under docs/measurements ("": NAME.md)
    quick: dict = field(default_factory=dict)   # input overrides of bench.run --quick
    opt_in: bool = False                     # bench.run runs it only when asked (--NAME)

    @property
    def page_name(self) -> str:
        return self.page or f"{self.name}.md"


def registry() -> dict[str, Section]:
    out = {}
    for module in MODULES:
        s = importlib.import_module(module).SECTION
        out[s.name] = s
    return out


def execute(section: Section, inputs: dict | None = None, *, smoke: bool = False, log=print, **extra) -> dict:
    """Run ``section`` on its smoke or full inputs (``inputs`` overrides some); ``extra`` goes to
    ``run`` unrecorded (the CI's shared server). The record: inputs, data, targets checked."""
    inputs = {**(section.smoke if smoke else section.full), **(inputs or {})}
    t0 = time.perf_counter()
    data = section.run(log=log, **inputs, **extra)
    return {"section": section.name, "smoke": smoke, "inputs": inputs, "data": data,
            "targets": check(section, data), "seconds": round(time.perf_counter() - t0, 1)}


def check(section: Section, data: dict) -> list[dict]:
    figures = section.figures(data) if data else {}
    return [t.check(figures.get(t.figure), data) for t in section.targets]


# -- the writer ------------------------------------------------------------------------------------
def stamp(command: str | None = None) -> dict:
    """What a page states: the command, the UTC date, the machine (with its git commit)."""
    from .machine import machine_info

    if command is None:
        command = " ".join(["scripts/bench.sh"] + [shlex.quote(a) for a in sys.argv[1:]])
    return {"command": command, "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine_info()}


def f(v, nd: int = 3, suffix: str = "") -> str:
    """A cell: n/a for None, yes/no for booleans, ``nd`` decimals for floats."""
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.{nd}f}{suffix}"
    return f"{v}{suffix}"


def table(header, rows) -> list[str]:
    return ["| " + " | ".join(map(str, header)) + " |", "|" + "|".join(" --- " for _ in header) + "|",
            *("| " + " | ".join(map(str, r)) + " |" for r in rows)]


def machine_line(m: dict) -> str:
    return (f"{m.get('cpu_count')} CPUs ({m.get('cpu_model')}), {m.get('memory_gb')} GB, Python {m.get('python')}, "
            f"torch {m.get('torch')} ({m.get('torch_threads')} threads), onnxruntime {m.get('onnxruntime')}, "
            f"OpenCV {m.get('opencv')}, PyAV {m.get('av')}; load average at start {m.get('load_average_at_start')}, "
            f"at end {m.get('load_average_at_end')}")


def stamp_lines(st: dict) -> list[str]:
    m = st.get("machine") or {}
    dirty = " (uncommitted changes)" if m.get("git_dirty") else ""
    return [f"- Command: `{st.get('command')}`", f"- Date: {st.get('date')}", f"- Machine: {machine_line(m)}",
            f"- Commit: {m.get('git_commit')}{dirty}"]


def target_table(rows: list[dict]) -> list[str]:
    if not rows:
        return ["None: this section reports figures, it judges none."]
    met = (lambda r: f(r["met"]) if r["met"] is not None else f"n/a ({r['note']})")
    return table(["target", "measured", "met"],
                 [[f"`{r['figure']}` {r['target']}" + (f": {r['what']}" if r.get("what") else ""),
                   f(r["measured"]), met(r)] for r in rows])


def page(section: Section, record: dict, st: dict) -> str:
    data = record["data"]
    about = section.about(data) if callable(section.about) else section.about
    lines = [f"# {section.title}", "",
             f"*Written by `bench/section.py` for the `{section.name}` section; do not edit by hand: rerun the "
             "command.*", "", about, "", *stamp_lines(st), "",
             "## Targets", "", *target_table(record["targets"]), "", *section.body(data)]
    return "\n".join(lines).rstrip("\n") + "\n"


def write(section: Section, record: dict, st: dict) -> str:
    """docs/measurements/<page> from a full run's record; returns the path written."""
    if record.get("smoke"):
        raise ValueError(f"{section.name}: a smoke run's numbers are not measurements; run it full to write a page")
    DOCS.mkdir(parents=True, exist_ok=True)
    path = DOCS / section.page_name
    path.write_text(page(section, record, st))
    return str(path.relative_to(REPO) if path.is_relative_to(REPO) else path)


def cli(section: Section, argv=None, module: str = "") -> int:
    """``python -m MODULE [--smoke] [--doc] [--set KEY=JSON ...]``: one section alone, through the
    same protocol as bench.run; writes out/bench/NAME.json (NAME_smoke.json) and, with --doc, its page."""
    from .machine import load_average

    argv = list(sys.argv[1:] if argv is None else argv)
    module = module or f"bench.{section.name}"
    ap = argparse.ArgumentParser(prog=f"python -m {module}", description=section.title)
    ap.add_argument("--smoke", action="store_true", help="the smoke inputs (seconds; no page)")
    ap.add_argument("--doc", action="store_true", help=f"also write docs/measurements/{section.page_name}")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                    help=f"override one input; full inputs: {json.dumps(section.full)}")
    args = ap.parse_args(argv)
    if args.doc and args.smoke:
        ap.error("--doc records a full run only")
    inputs = {k: json.loads(v) for k, v in (s.split("=", 1) for s in args.set)}
    st = stamp(" ".join([f"python -m {module}", *map(shlex.quote, argv)]))
    t0 = time.perf_counter()
    record = execute(section, inputs, smoke=args.smoke,
                     log=lambda m: print(f"[{section.name} {time.perf_counter() - t0:7.1f}s] {m}", flush=True))
    st["machine"]["load_average_at_end"] = load_average()
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{section.name}{'_smoke' if args.smoke else ''}.json"
    path.write_text(json.dumps({"run": st, **record}, indent=1, default=str))
    print("\n".join(target_table(record["targets"])), f"\nwrote {path}", flush=True)
    if args.doc:
        print(f"wrote {write(section, record, st)}", flush=True)
    return 0


def write_lines(name: str, title: str, about: str, command: str, lines: list[str]) -> str:
    """The page of a calibration script outside bench.run: the same layout (stamp, target table:
    a calibration judges none), its own tables as the body; returns the path written."""
    s = Section(name=name, title=title, about=about, run=lambda log=print: {}, smoke={}, full={},
                body=lambda data: data["lines"])
    return write(s, {"data": {"lines": lines}, "targets": []}, stamp(command))
