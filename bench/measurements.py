"""Write docs/measurements/*.md from a benchmark run: the only place measured numbers live.

Docstrings and the README link to these files instead of quoting numbers, so a number can
never disagree with the run that produced it. Each file names the command, the date, the git
commit and the machine it came from. A section that did not run leaves its file untouched.
"""
from __future__ import annotations

import datetime as _dt
import shlex
import statistics
import sys

from . import report
from .paths import REPO

DOCS = REPO / "docs" / "measurements"


def stamp() -> dict:
    """Command line and UTC time of this run, recorded next to the machine facts."""
    return {"command": " ".join([_command()] + [shlex.quote(a) for a in sys.argv[1:]]),
            "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def _command() -> str:
    prog = sys.argv[0] if sys.argv else ""
    for module in ("tiled_vae", "farm", "quality/sources", "server_job", "soak", "qa_labels/agreement"):
        if prog.endswith(f"{module}.py"):
            return f"python -m bench.{module.replace('/', '.')}"
    return "scripts/bench.sh"


def header(title: str, what: str, run: dict, machine: dict) -> list[str]:
    return [f"# {title}", "",
            "*Written by the benchmark; do not edit by hand (the next run overwrites it).*", "",
            what, "",
            f"- Command: `{run.get('command')}`",
            f"- Date: {run.get('date')}",
            f"- Machine: {report.machine_line(machine)}", ""]


def tiled_vae_doc(tv: dict, machine: dict, run: dict) -> str:
    w, h = tv["size"]
    lines = header("Tiled VAE encode: measurements",
                    f"Exact tiled encode (`swapline_core/diffusion/tiled_vae/`, node `SwaplineTiledVAEEncode`) "
                    f"against core `VAEEncode` and `VAEEncodeTiled` on one {w}x{h} frame. Method and setup: "
                    "`bench/tiled_vae.py` (module docstring) and `bench/README.md`.", run, machine)
    lines += [f"VAE: {tv.get('vae')}.", "", "## Targets", ""]
    lines += report._table(["metric", "measured", "target", "met"], report.tiled_vae_rows(tv)) + [""]
    lines += ["## Per method", ""] + report.tiled_vae_table(tv) + [""]
    abl = tv.get("ablation")
    if abl:
        lines += [f"Ablation tile {abl.get('tile')}, overlap {abl.get('overlap')}; load average "
                  f"{tv.get('load_average_at_start')} at start, {tv.get('load_average_at_end')} at end.", ""]
    if tv.get("errors"):
        lines += ["## Errors", ""] + [f"- {k}: {str(e).splitlines()[0][:300]}" for k, e in tv["errors"].items()] + [""]
    return "\n".join(lines)


def bench_doc(results: dict, run: dict) -> str:
    lines = header("Video pipeline benchmark: measurements",
                    "Naive per-frame baseline against Swapline's streaming pipeline (same models, clip and "
                    "encoder settings), peak RSS of a real ComfyUI server on a long vs a short clip, and "
                    "per-stage times. Method: `bench/README.md`. Full tables: `out/bench/results.md` of the "
                    "same run.", run, results["machine"])
    lines += ["## Targets", ""] + report.headline(results) + [""]
    lines += ["## Speed", ""] + report.speed_table(results) + [""]
    lines += ["## Peak RSS", ""] + report.rss_table(results) + [""]
    lines += ["## Per-stage time (s)", ""] + report.stage_table(results) + [""]
    if results.get("errors"):
        lines += ["## Errors", ""] + [f"- {k}: {str(e).splitlines()[0][:300]}" for k, e in results["errors"].items()]
        lines.append("")
    return "\n".join(lines)


def quality_doc(q: dict, machine: dict, run: dict) -> str:
    from .quality.report import markdown as quality_md

    lines = header("Swap quality on known-truth cases: measurements",
                    "The swap a viewer sees, scored by an independent scorer on cases whose truth is known by "
                    "construction (`bench/quality/`, method in `bench/README.md`). Before/after strips of each "
                    "case: `out/bench/quality_<case>.png` of the same run.", run, machine)
    return "\n".join(lines + quality_md(q) + [""])


def write(results: dict) -> list[str]:
    """Write the docs for the sections of a complete bench.run result; returns the paths written."""
    DOCS.mkdir(parents=True, exist_ok=True)
    run = results.get("run") or stamp()
    written = []
    if results.get("tiled_vae"):
        (DOCS / "tiled_vae.md").write_text(tiled_vae_doc(results["tiled_vae"], results["machine"], run))
        written.append("docs/measurements/tiled_vae.md")
    if results.get("quality"):
        (DOCS / "quality.md").write_text(quality_doc(results["quality"], results["machine"], run))
        written.append("docs/measurements/quality.md")
    if results.get("farm"):
        from .farm import doc as farm_doc

        (DOCS / "farm.md").write_text(farm_doc(results["farm"], results["machine"], run))
        written.append("docs/measurements/farm.md")
    if results.get("server_job"):
        from .server_job import doc as server_job_doc

        (DOCS / "server_job.md").write_text(server_job_doc(results["server_job"], results["machine"], run))
        written.append("docs/measurements/server_job.md")
    s = results.get("settings", {})
    if not (s.get("skip_speed") and s.get("skip_rss")):
        (DOCS / "bench.md").write_text(bench_doc(results, run))
        written.append("docs/measurements/bench.md")
    return written


def write_tiled_vae(tv: dict) -> str:
    """bench.tiled_vae run alone: its own machine facts and stamp."""
    from .machine import machine_info

    DOCS.mkdir(parents=True, exist_ok=True)
    (DOCS / "tiled_vae.md").write_text(tiled_vae_doc(tv, machine_info(), stamp()))
    return "docs/measurements/tiled_vae.md"


def write_farm(farm: dict, machine: dict) -> str:
    """bench.farm run alone: its own stamp."""
    from .farm import doc as farm_doc

    DOCS.mkdir(parents=True, exist_ok=True)
    (DOCS / "farm.md").write_text(farm_doc(farm, machine, stamp()))
    return "docs/measurements/farm.md"


def _median(values) -> str:
    return f"{statistics.median(values):.3f}" if values else "n/a"


def sources_summary(rows: dict) -> str:
    """One line over the colour sources: the greyscale default source is not a fair comparison."""
    colour = [r for r in rows.values() if r.get("colour") and r.get("moved_to_source") is not None]
    if not colour:
        return "No colour source was scored."
    moved = [r["moved_to_source"] for r in colour]
    toward = [r["toward_source"] for r in colour if r.get("toward_source") is not None]
    return (f"Over the {len(colour)} colour sources: median moved_to_source {_median(moved)}, median toward_source "
            f"{_median(toward)}; {sum(v >= 0.9 for v in moved)} of {len(colour)} reach moved_to_source >= 0.9 "
            f"({sum(v >= 0.9 for v in toward)} reach toward_source >= 0.9).")


def write_sources(rows: dict, clip: str, machine: dict) -> str:
    """bench.quality.sources run alone: the speech case with several source faces."""
    lines = header("Identity with other source faces: measurements",
                    f"The quality bench's speech case (`{clip}`) swapped with each source image; the same "
                    "pipeline and independent scorer as `quality.md` (`bench/quality/sources.py`). The bench's "
                    "default source is `source_face.png` (greyscale, 112 px); `moved_to_source` depends on how far "
                    "the source is from the target to begin with (d(target, source)) and on the target's kept "
                    "glasses frames. `--panel` adds a fixed panel of faces cropped from frames of MIT-licensed "
                    "ComfyUI workflow-template wheels (PyPI) and insightface's t1.jpg (recipe and who is who: "
                    "`bench/quality/panel.py`; crops: `out/bench/sources/panel/`). "
                    "Strips: `out/bench/sources/<clip>_<source>.png`.", stamp(), machine)
    lines += [sources_summary(rows), ""]
    lines += ["| source | moved_to_source | toward_source | d(res,src) | d(res,tgt) | d(tgt,src) | face_delta_e "
              "| mouth_open_corr | origin |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in rows.items():
        d = r.get("identity_distances") or [None] * 3
        cells = [r.get("moved_to_source"), r.get("toward_source"), *d, r.get("face_delta_e"),
                 r.get("mouth_open_corr")]
        lines.append(f"| {name} | " + " | ".join("n/a" if v is None else f"{v:.3f}" for v in cells)
                     + f" | {r.get('origin', 'n/a')} |")
    DOCS.mkdir(parents=True, exist_ok=True)
    (DOCS / "quality_sources.md").write_text("\n".join(lines + [""]))
    return "docs/measurements/quality_sources.md"
