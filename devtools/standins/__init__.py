"""Exact-architecture, random-weight stand-ins of the published face models, for timing only.

The synthetic models of ``devtools.synthetic_models`` / ``synthetic_swappers`` have the real
signatures but are tiny: right for loaders, meaningless for speed. These are the published
architectures at their published sizes (parameter count within 1 % of the published figure,
checked by tests/unit/bench/test_standins.py), with random weights: their output is noise, their
cost is the real model's. Built at test/bench time from our own code written after the published
architectures (no weights, nothing downloaded); each module names the code it follows and says
plainly what, if anything, is approximated.

Each stand-in module (``devtools/lib/standins/<name>.py``, torch code kept out of this package: see
``devtools.lib``) defines:

- ``SPEC``: a :class:`StandIn` (name, the role it times, published figures and where they are
  published, its ONNX input/output names and per-face input shapes);
- ``build() -> torch.nn.Module``: the architecture in eval mode, random weights from a fixed seed.

:func:`module` imports a stand-in's module by name; ``devtools.standins.export`` writes ONNX files.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field


@dataclass(frozen=True)
class StandIn:
    name: str                               # file stem the ONNX is written as
    role: str                               # "detector", "recogniser", "swapper", "restorer"
    published_params: int                   # as published (see ``source``)
    published_gflops: float | None          # per face (per image for the detector), as published
    flops_convention: str                   # how the publisher counts: "MACs" or "FLOPs (2 x MACs)"
    source: str                             # where both figures are published
    inputs: tuple[tuple[str, tuple[int, ...]], ...]   # ONNX input names and per-item shapes (no batch)
    outputs: tuple[str, ...]                # ONNX output names
    approximated: str = ""                  # what differs from the published graph ("" = nothing)
    notes: tuple[str, ...] = field(default_factory=tuple)


NAMES = ("arcface_r50", "scrfd_10g_kps", "inswapper_128", "ghost_aei_256", "gfpgan_v1_4", "gpen_bfr_512")


def randomise_norms(model) -> None:
    """Fresh BatchNorm layers are identities: give them non-trivial statistics (fixed seed) so a
    random network's activations stay finite and varied (timing does not depend on it, the
    batch-parity checks do)."""
    import torch
    from torch import nn

    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            n = m.num_features
            m.weight.data = 0.5 + 0.5 * torch.rand(n, generator=g)
            m.bias.data = 0.1 * torch.randn(n, generator=g)
            m.running_mean.copy_(0.1 * torch.randn(n, generator=g))
            m.running_var.copy_(1.0 + torch.rand(n, generator=g))


def module(name: str):
    if name not in NAMES:
        raise KeyError(f"unknown stand-in '{name}'; known: {', '.join(NAMES)}")
    return importlib.import_module(f"..lib.standins.{name}", __name__)
