"""Write the stand-ins as ONNX files (cached) and compare their size with the published figures.

``python -m devtools.standins.export OUT_DIR [name ...]`` writes ``OUT_DIR/<name>.onnx`` and
prints parameters and FLOPs against the published ones. Files are exported once into
``tests/.cache/standins/v<VERSION>/<name>/`` (fp32, dynamic batch axis on every input and output) and
hard-linked from there. The INSwapper stand-in gets the 512x512 ``emap`` appended as its last
initializer, where insightface and our loader read it, so it loads as an INSwapper file.
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..build_cache import build_cached, link_all
from . import NAMES, module
from .count import example_inputs, flops, parameters

VERSION = 2  # bump whenever a stand-in module changes: the cache is keyed by it alone
REPO = Path(__file__).resolve().parents[2]
DEFAULT_CACHE = REPO / "tests" / ".cache" / "standins" / f"v{VERSION}"


def _append_emap(path: Path) -> None:
    import numpy as np
    import onnx
    from onnx import numpy_helper

    proto = onnx.load(str(path))
    if proto.graph.initializer and proto.graph.initializer[-1].name == "emap":
        return
    rng = np.random.default_rng(3)
    emap = (rng.standard_normal((512, 512)) / np.sqrt(512)).astype(np.float32)
    proto.graph.initializer.append(numpy_helper.from_array(emap, "emap"))
    onnx.save(proto, str(path))


def export(name: str, path: Path, half: bool = False) -> None:
    """One stand-in to ``path``; ``half``: fp16 weights and inputs (for GPUs: CPU onnxruntime lacks
    most fp16 kernels)."""
    import warnings

    import torch

    mod = module(name)
    spec = mod.SPEC
    model = mod.build()
    inputs = example_inputs(spec, batch=1)
    if half:
        model, inputs = model.half(), tuple(x.half() for x in inputs)
    names_in = [n for n, _ in spec.inputs]
    axes = {n: {0: "batch"} for n in (*names_in, *spec.outputs)}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, inputs, str(path), input_names=names_in, output_names=list(spec.outputs),
                          dynamic_axes=axes, opset_version=17, dynamo=False)
    if name == "inswapper_128":
        _append_emap(path)


def build(names=NAMES, cache: Path = DEFAULT_CACHE) -> dict[str, Path]:
    """{name: cached fp32 ONNX path}, exporting what is missing (one cache folder per model)."""
    out = {}
    for n in names:
        build_cached(cache / n, {n: f"{n}.onnx"}, {n: lambda p, n=n: export(n, p)})
        out[n] = cache / n / f"{n}.onnx"
    return out


def link(out_dir: Path, names=NAMES) -> dict[str, Path]:
    return {n: link_all(p.parent, {n: p.name}, out_dir)[n] for n, p in build(names).items()}


def size_row(name: str, with_flops: bool = True) -> dict:
    """Parameters and FLOPs of the stand-in against the published figures."""
    mod = module(name)
    spec = mod.SPEC
    model = mod.build()
    n = parameters(model)
    row = {"name": name, "role": spec.role, "params": n, "published_params": spec.published_params,
           "params_ratio": round(n / spec.published_params, 5), "published_gflops": spec.published_gflops,
           "flops_convention": spec.flops_convention, "source": spec.source, "approximated": spec.approximated,
           "notes": list(spec.notes)}
    if with_flops:
        f = flops(model, example_inputs(spec, batch=1))
        row["gflops"] = round(f["gmacs"] if spec.flops_convention == "MACs" else f["gflops"], 3)
    return row


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    out = Path(argv[0])
    names = tuple(argv[1:]) or NAMES
    for name, path in link(out, names).items():
        r = size_row(name)
        print(f"{name}: {r['params'] / 1e6:.2f} M parameters (published {r['published_params'] / 1e6:.2f} M, "
              f"x{r['params_ratio']}), {r['gflops']} G{'MACs' if r['flops_convention'] == 'MACs' else 'FLOPs'} "
              f"(published {r['published_gflops']}) -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
