"""Per-stage tables: wall seconds and CPU-seconds per frame per stage, fps, and the share of the
wall that is not decode, model inference or encode (the pipeline's own glue: flow, masks, guards,
paste, the chunk store)."""
from __future__ import annotations

from .instrument import INFERENCE, OTHER_LABELS, ROWS


def from_probe(seconds: dict, wall: float, frames: int, cpu: dict | None = None) -> dict:
    """A stage table from exclusive probe seconds (and CPU seconds) of one run of ``wall`` seconds."""
    rows, cpu_rows, known = {}, {}, 0.0
    cpu = cpu or {}
    for name, labels in ROWS:
        if labels is None:
            rows[name] = cpu_rows[name] = None
            continue
        rows[name] = round(sum(seconds.get(k, 0.0) for k in labels), 3)
        cpu_rows[name] = round(sum(cpu.get(k, 0.0) for k in labels) / frames, 4) if frames and cpu else None
        known += rows[name]
    rows["other"] = round(max(wall - known, 0.0), 3)
    detail = {k: round(seconds.get(k, 0.0), 3) for k in OTHER_LABELS}
    detail["untimed"] = round(max(rows["other"] - sum(detail.values()), 0.0), 3)
    inference = sum(seconds.get(k, 0.0) for k in INFERENCE)
    core = inference + rows["decode"] + rows["encode"]
    return {"seconds": rows, "cpu_s_per_frame": cpu_rows, "other_detail": detail, "wall_s": round(wall, 3),
            "inference_s": round(inference, 3),
            "glue_share": round(1.0 - core / wall, 4) if wall > 0 else None,
            "fps": round(frames / wall, 3) if wall > 0 else None}


def markdown(stages: dict) -> list[str]:
    """Stage tables side by side: {column: from_probe(...) or rss.stage_table(...)}."""
    from .section import f, table

    if not stages:
        return ["(no runs)"]
    keys = list(stages)
    names = [name for name, _ in ROWS] + ["other"]
    rows = [[name] + [f(stages[k]["seconds"].get(name), 2) for k in keys] for name in names]
    if any(stages[k].get("cpu_s_per_frame") for k in keys):
        rows += [[f"{name}: CPU s / frame"] + [f((stages[k].get("cpu_s_per_frame") or {}).get(name), 4)
                                               for k in keys] for name, _ in ROWS]
    rows += [["**total (wall)**"] + [f(stages[k]["wall_s"], 2) for k in keys],
             ["fps"] + [f(stages[k]["fps"], 2) for k in keys],
             ["model inference s"] + [f(stages[k]["inference_s"], 2) for k in keys],
             ["share of the wall not decode, inference or encode"] + [f(stages[k].get("glue_share"), 3)
                                                                       for k in keys],
             ["other = "] + ["; ".join(f"{a} {f(b, 2)}" for a, b in stages[k]["other_detail"].items()) for k in keys]]
    return table(["stage (s)"] + keys, rows)
