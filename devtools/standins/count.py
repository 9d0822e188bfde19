"""Parameter and FLOP counts of a torch module, for comparing stand-ins with published figures.

FLOPs come from ``torch.utils.flop_counter.FlopCounterMode`` on one forward (2 per multiply-add,
convolutions and matrix products only); publishers differ (mmcv and thop count multiply-adds and
call them FLOPs), so both are returned and the stand-in's ``flops_convention`` says which to compare.
"""
from __future__ import annotations


def parameters(model) -> int:
    return int(sum(p.numel() for p in model.parameters()))


def flops(model, inputs: tuple) -> dict:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(*inputs)
    total = int(counter.get_total_flops())
    return {"gflops": total / 1e9, "gmacs": total / 2e9}


def example_inputs(spec, batch: int = 1, seed: int = 0) -> tuple:
    import torch

    g = torch.Generator().manual_seed(seed)
    return tuple(torch.rand((batch, *shape), generator=g) for _, shape in spec.inputs)
