"""The QA gate's source-check rule on the labelled faces: what failing every face swapped from a
source photo Build Face Model warned about (``QAThresholds.fail_on_source_warning``, on with the
labelled limit sets) does to the gate's agreement with the viewers.

Which sources warn is read, not assumed: Build Face Model's check (``faces.source_check``) on each
labelled source photo, its face found by the built-in mesh analyzer as the shipped workflow does.
The figures: the gate leave-one-clip-out and the shipped labelled set, each as it is and with the
warned sources' faces failed, overall and on those sources' faces alone. The rule was not chosen on
these figures (it follows the check's own thresholds, docs/measurements/source_check.md), but those
thresholds were calibrated on photos that include this very small source, and the warning's reach
is one source photo here: the figures are the development set's, tuned on, and say what the rule
does on those clips, not how often a new source photo warns.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np


@lru_cache(maxsize=1)
def source_checks() -> dict[str, dict]:
    """{source name: the check of its photo (status, eye distance, the size it holds detail at)}."""
    from PIL import Image

    from swapline_core.backends.mesh_analyzer import MeshAnalyzer
    from swapline_core.faces import source_check

    from . import build

    analyzer = MeshAnalyzer()
    out = {}
    for name, src in sorted(build.sources().items()):
        rgb = np.asarray(Image.open(src.path).convert("RGB"))
        faces = analyzer.detect([rgb])[0]
        if not faces:
            out[name] = {"status": "no face"}
            continue
        check = source_check.check_sources([rgb], [faces[0]])
        image = check["images"][0]
        out[name] = {"status": check["status"], "inter_ocular_px": image["inter_ocular_px"],
                     "detail_iod_px": image.get("detail_iod_px")}
    return out


def figures(rows: list[dict], loco: np.ndarray, shipped_set: np.ndarray | None, checks: dict) -> dict:
    """The gate's scores with and without the rule (``loco``, ``shipped_set``: per-face passes)."""
    from .agreement import scores

    acc = np.array([r["acceptable"] for r in rows], bool)
    warned_names = sorted(n for n, c in checks.items() if c.get("status") == "warn")
    warned = np.array([r["source"] in warned_names for r in rows], bool)
    out = {"checks": {n: c for n, c in checks.items() if n in {r["source"] for r in rows}},
           "warned_sources": warned_names, "warned_faces": int(warned.sum()),
           "warned_accepted": int(acc[warned].sum())}
    for key, passed in (("loco", loco), ("shipped_set", shipped_set)):
        if passed is None:
            continue
        out[key] = {"as_is": scores(acc, passed), "with_rule": scores(acc, passed & ~warned),
                    "warned_as_is": scores(acc[warned], passed[warned]) if warned.any() else None}
    return out
