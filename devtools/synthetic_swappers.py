"""Stand-ins for every neural swapper family (and FaceFusion's embedding converters), under the
published file names, with the published input/output signatures (docs/swappers.md):

- ``target`` [1,3,S,S] float32 in the family's normalisation, ``source`` [1,512] (an embedding)
  or [1,3,s,s] (an aligned source face, RGB/255) -> one [1,3,S,S] output in the family's output
  range ([0,1], or the input's normalised space for HyperSwap/GHOST/HiFiFace/UniFace);
- INSwapper-architecture files (reswapper_128/256) carry the 512x512 ``emap`` as their last
  initializer, like inswapper_128;
- converters ``crossface_*.onnx``: ``input`` [1,512] -> [1,512];
- GPEN-BFR restorers (FaceFusion's ``gpen_bfr_256/1024.onnx``, ReActor's ``GPEN-BFR-512.onnx``):
  ``input`` [1,3,S,S] in [-1,1] -> [1,3,S,S] in [-1,1].

Each graph undoes its family's normalisation, nudges the target face by a random convnet driven by
the source, and re-applies the output normalisation: run with the right pre/post-processing the
swapped crop stays recognisably the target (so paste-back can be checked), and it changes with the
source; run with the wrong one, the crop comes out far off (dark, washed out). Weights are random:
these are not face swappers, they are exact-signature stand-ins for loaders and pipelines.

Built once into ``tests/.cache/synthetic-swappers/v<VERSION>`` and hard-linked into models folders
(same cache rules as synthetic_models.py). ``python -m devtools.synthetic_swappers MODELS_DIR``.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from .build_cache import build_cached, link_all
from .lib import nets
from .synthetic_models import export_onnx, export_swapper

VERSION = 3  # bump whenever a builder changes: the cache is keyed by it alone
REPO = Path(__file__).resolve().parent.parent
DEFAULT_CACHE = REPO / "tests" / ".cache" / "synthetic-swappers" / f"v{VERSION}"

HALF, ZERO, ONE = (0.5, 0.5, 0.5), (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))

# role -> (relative path, builder kind, args). Folders: ReActor's models/hyperswap and
# models/reswapper; FaceFusion's .assets/models as models/facefusion.
SWAPPERS = {
    "hyperswap_1a_256": ("hyperswap/hyperswap_1a_256.onnx", "net", (256, "emb", HALF, "denorm", 11)),
    "hyperswap_1b_256": ("hyperswap/hyperswap_1b_256.onnx", "net", (256, "emb", HALF, "denorm", 12)),
    "hyperswap_1c_256": ("hyperswap/hyperswap_1c_256.onnx", "net", (256, "emb", HALF, "denorm", 13)),
    "ghost_1_256": ("facefusion/ghost_1_256.onnx", "net", (256, "emb", HALF, "denorm", 21)),
    "ghost_2_256": ("facefusion/ghost_2_256.onnx", "net", (256, "emb", HALF, "denorm", 22)),
    "ghost_3_256": ("facefusion/ghost_3_256.onnx", "net", (256, "emb", HALF, "denorm", 23)),
    "crossface_ghost": ("facefusion/crossface_ghost.onnx", "converter", (24,)),
    "simswap_256": ("facefusion/simswap_256.onnx", "net", (256, "emb", IMAGENET, "unit", 31)),
    "simswap_unofficial_512": ("facefusion/simswap_unofficial_512.onnx", "net", (512, "emb", (ZERO, ONE), "unit", 32)),
    "crossface_simswap": ("facefusion/crossface_simswap.onnx", "converter", (33,)),
    "blendswap_256": ("facefusion/blendswap_256.onnx", "net", (256, 112, (ZERO, ONE), "unit", 41)),
    "uniface_256": ("facefusion/uniface_256.onnx", "net", (256, 256, HALF, "denorm", 51)),
    "reswapper_128": ("reswapper/reswapper_128.onnx", "inswapper", (128,)),
    "reswapper_256": ("reswapper/reswapper_256.onnx", "inswapper", (256,)),
    # GPEN-BFR restorers: ``input`` [1,3,S,S] in [-1,1] -> one [1,3,S,S] output in [-1,1]
    "gpen_bfr_256": ("facefusion/gpen_bfr_256.onnx", "gpen", (256, 61)),
    "gpen_bfr_1024": ("facefusion/gpen_bfr_1024.onnx", "gpen", (1024, 62)),
    "GPEN-BFR-512": ("facerestore_models/GPEN-BFR-512.onnx", "gpen", (512, 63)),
}
FILES = {role: rel for role, (rel, _k, _a) in SWAPPERS.items()}


def _build(kind: str, args: tuple):
    def build(path: Path) -> None:
        import torch

        if kind == "inswapper":
            export_swapper(path, args[0])
        elif kind == "gpen":
            size, seed = args
            gpen = nets.gpen_module(seed)
            export_onnx(gpen, (torch.rand(1, 3, size, size) * 2 - 1,), path, input_names=["input"],
                        output_names=["output"])
        elif kind == "converter":
            lin = nets.converter_module(args[0])
            export_onnx(lin, (torch.randn(1, 512),), path, input_names=["input"], output_names=["output"])
        else:
            model, dummy = nets.swapper_family_module(*args)
            export_onnx(model, dummy, path, input_names=["target", "source"], output_names=["output"])
    return build


BUILDERS = {role: _build(kind, args) for role, (_rel, kind, args) in SWAPPERS.items()}


def ensure_cache(cache_dir: Path | None = None) -> Path:
    return build_cached(Path(cache_dir or os.environ.get("SWAPLINE_SYNTHETIC_SWAPPER_CACHE") or DEFAULT_CACHE),
                        FILES, BUILDERS)


def build_swappers(models_dir: Path, cache_dir: Path | None = None) -> dict[str, Path]:
    """Place every family's stand-in under ``models_dir``; role (published model name) -> path."""
    return link_all(ensure_cache(cache_dir), FILES, Path(models_dir))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m devtools.synthetic_swappers MODELS_DIR", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    for role, path in build_swappers(Path(argv[0])).items():
        print(f"{role:24s} {path} ({path.stat().st_size / 1e6:.2f} MB)")
    print(f"done in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main(sys.argv[1:]))
