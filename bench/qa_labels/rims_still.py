"""Before/after of the glasses-rim rule (``masks/rims.py``) on the development stills it was built
on: target | shipped mesh path with the rule off | with it, the demo's source photo.

    .venv/bin/python -m bench.qa_labels.rims_still    # -> docs/images/rims_before_after.jpg

The stills are from the MIT image templates wheel (``comfyui-workflow-templates-media-image``
0.3.160), looked at while the rule was made: development pictures, not a check.
"""
from __future__ import annotations

import numpy as np

from ..paths import REPO
from ..quality.panel import IMAGE, _fsm

OUT = REPO / "docs" / "images" / "rims_before_after.jpg"
CACHE = REPO / "out" / "bench" / "qa_labels" / "stills"
# (still, what it shows)
STILLS = (("image_longcat_text_to_image-1.webp", "thin gold rims, orange-tinted lenses"),
          ("image_hidream_o1_dev-1.webp", "thin rims, red lenses, three-quarter view"))
SOURCE = REPO / "assets" / "samples" / "source_face_woman.png"
TILE = 360


def build(out=OUT) -> str:
    import cv2
    from PIL import Image

    from swapline_core.backends.blazeface import MIN_SCORE
    from swapline_core.backends.mesh_analyzer import MeshAnalyzer
    from swapline_core.backends.mesh_swap import MeshSwapper
    from swapline_core.faces import identity as fm
    from swapline_core.masks import MaskOptions
    from swapline_core.swap.chunk import SwapOptions, swap_chunk

    paths = _fsm().fetch(CACHE, members=tuple(f"templates/{n}" for n, _ in STILLS), dist=IMAGE[0], version=IMAGE[1])
    an = MeshAnalyzer(threshold=MIN_SCORE)
    swapper = MeshSwapper(mask_erosion=0.0, mask_feather=0.05, analyzer=an)
    source = fm.build_from_images(an, [np.asarray(Image.open(SOURCE).convert("RGB"))])
    rows, notes = [], []
    for (name, _shows), path in zip(STILLS, paths):
        im = np.asarray(Image.open(path).convert("RGB"))
        face = max(an.detect([im])[0], key=lambda f: f.bbox[2] - f.bbox[0])
        x0, y0, x1, y1 = face.bbox[:4]
        cx, cy, s = (x0 + x1) / 2, (y0 + y1) / 2, 1.3 * max(x1 - x0, y1 - y0)
        a, b = int(max(0, cx - s / 2)), int(max(0, cy - s / 2))
        c, d = int(min(im.shape[1], cx + s / 2)), int(min(im.shape[0], cy + s / 2))
        tiles = [im]
        for off in (("rims",), ()):
            res = swap_chunk(swapper, an, [im], [[face]], source, SwapOptions(masks=MaskOptions(rules_off=off)))
            rec = res.records[0][0]
            kept = rec.get("masks", {}).get("rules", {}).get("rims", {}).get("count", 0)
            notes.append(f"{name} rims {'off' if off else 'on'}: {rec.get('status')}, rims kept {kept} px")
            tiles.append(res.frames[0])
        rows.append(np.concatenate([cv2.resize(t[b:d, a:c], (TILE, TILE), interpolation=cv2.INTER_AREA)
                                    for t in tiles], 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.concatenate(rows, 0)).save(out, quality=90)
    return "\n".join(notes + [f"-> {out}"])


if __name__ == "__main__":
    print(build())
