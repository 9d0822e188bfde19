"""Per-stage tables: seconds per stage, fps and the share of time outside model inference."""
from __future__ import annotations

from .instrument import INFERENCE, OTHER_LABELS, ROWS


def from_probe(seconds: dict, wall: float, frames: int) -> dict:
    """A stage table from exclusive probe seconds of one run of ``wall`` seconds."""
    rows, known = {}, 0.0
    for name, labels in ROWS:
        if labels is None:
            rows[name] = None
            continue
        rows[name] = round(sum(seconds.get(k, 0.0) for k in labels), 3)
        known += rows[name]
    rows["other"] = round(max(wall - known, 0.0), 3)
    detail = {k: round(seconds.get(k, 0.0), 3) for k in OTHER_LABELS}
    detail["untimed"] = round(max(rows["other"] - sum(detail.values()), 0.0), 3)
    inference = sum(seconds.get(k, 0.0) for k in INFERENCE)
    return {"seconds": rows, "other_detail": detail, "wall_s": round(wall, 3),
            "inference_s": round(inference, 3),
            "non_inference_share": round(1.0 - inference / wall, 4) if wall > 0 else None,
            "fps": round(frames / wall, 3) if wall > 0 else None}
