"""Exact-signature stand-ins for the mask stack's optional models (FaceFusion's ONNX files):
XSeg occluder and BiSeNet face parser, random weights, real input/output names and shapes."""
from __future__ import annotations

from pathlib import Path

from .lib import nets
from .synthetic_models import export_onnx

# Tiny, built on demand (not in the big cache, so adding them did not rebuild it): XSeg occluder
# and BiSeNet face parser with FaceFusion's I/O (swapline_core/masks/onnx_models.py).
MASK_FILES = {"occluder": "facemask/xseg_1.onnx", "parser": "facemask/bisenet_resnet_34.onnx"}


def _build_occluder(path: Path) -> None:
    """XSeg signature: ``input`` float32 NHWC [1,256,256,3] (BGR 0..1) -> [1,256,256,1] in 0..1."""
    import torch

    model = nets.xseg_module()
    export_onnx(model, (torch.rand(1, 256, 256, 3),), path, input_names=["input"], output_names=["output"])


def _build_parser(path: Path) -> None:
    """BiSeNet signature (yakhyo/face-parsing export): ``input`` [N,3,512,512] (ImageNet-normalised
    RGB) -> ``output`` [N,19,512,512] logits plus the two auxiliary heads of the same shape."""
    import torch

    model = nets.bisenet_module()
    export_onnx(model, (torch.randn(1, 3, 512, 512),), path, input_names=["input"],
            output_names=["output"], dynamic_axes={"input": {0: "batch_size"}, "output": {0: "batch_size"}})


def build_mask_models(models_dir: Path) -> dict[str, Path]:
    """Place the XSeg and BiSeNet stand-ins under ``models_dir/facemask`` (~0.1 s, 20 kB)."""
    out = {}
    for role, rel in MASK_FILES.items():
        path = Path(models_dir) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        {"occluder": _build_occluder, "parser": _build_parser}[role](path)
        out[role] = path
    return out
