"""Mask models users already have from FaceFusion: the DeepFaceLab XSeg occluder and the BiSeNet
face parser (ONNX). Input/output conventions follow FaceFusion's face_masker (read, not copied):

- XSeg (xseg_1/2/3.onnx, GPL-3.0): input ``input`` float32 NHWC [N,256,256,3], the aligned crop
  in BGR order scaled to 0..1; output [N,256,256,1], 1 = face, 0 = occluder.
- BiSeNet (bisenet_resnet_18/34.onnx, MIT): input ``input`` float32 NCHW [N,3,512,512], RGB
  scaled to 0..1 then ImageNet mean/std; first output [N,19,512,512] class logits
  (CelebAMask-HQ labels: 1 skin, 2/3 brows, 4/5 eyes, 6 glasses, 10 nose, 11 mouth, 12/13 lips).

Signatures are checked when a file is loaded so a wrong file fails with its name.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..backends.cache import cached
from ..backends.onnx_batch import BatchRun
from ..backends.onnx_sessions import create_session
from ..backends.trt_profile import FACES
from ..errors import BadModelError

XSEG_SIZE = 256
PARSER_SIZE = 512
PARSER_CLASSES = 19
_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
_STD = np.array([0.229, 0.224, 0.225], np.float32)


def _sig(session) -> str:
    return (", ".join(f"{i.name}{i.shape}" for i in session.get_inputs()) + " -> "
            + ", ".join(f"{o.name}{o.shape}" for o in session.get_outputs()))


class Occluder:
    def __init__(self, path: str, provider: str = "auto"):
        self.path, self.name = path, Path(path).name
        self.session = create_session(path, provider, FACES)
        ins, outs = self.session.get_inputs(), self.session.get_outputs()
        if not (len(ins) == 1 and len(ins[0].shape) == 4 and list(ins[0].shape[1:]) == [XSEG_SIZE, XSEG_SIZE, 3]
                and outs and len(outs[0].shape) == 4):
            raise BadModelError(path, "it is not an XSeg occluder (expected input [N,256,256,3] and an output "
                                      f"[N,256,256,1], as FaceFusion's xseg_1/2/3.onnx; got {_sig(self.session)})")
        self.input = ins[0].name
        self.runner = BatchRun(self.session)
        self.providers = list(self.session.get_providers())

    def __call__(self, crops_rgb: np.ndarray) -> np.ndarray:
        """(N,256,256,3) uint8 RGB aligned crops -> (N,256,256) float32 "face" probability."""
        x = np.ascontiguousarray(crops_rgb[..., ::-1], dtype=np.float32) / 255.0
        y = self.runner({self.input: x})[0].astype(np.float32)
        y = y[..., 0] if y.shape[-1] == 1 else y[:, 0]
        return np.clip(y, 0.0, 1.0)


class Parser:
    def __init__(self, path: str, provider: str = "auto"):
        self.path, self.name = path, Path(path).name
        self.session = create_session(path, provider, FACES)
        ins, outs = self.session.get_inputs(), self.session.get_outputs()
        if not (len(ins) == 1 and len(ins[0].shape) == 4 and list(ins[0].shape[1:]) == [3, PARSER_SIZE, PARSER_SIZE]
                and outs and len(outs[0].shape) == 4
                and (outs[0].shape[1] == PARSER_CLASSES or not isinstance(outs[0].shape[1], int))):
            raise BadModelError(path, "it is not a BiSeNet face parser (expected input [N,3,512,512] and a first "
                                      f"output [N,19,512,512], as FaceFusion's bisenet_resnet_18/34.onnx; got "
                                      f"{_sig(self.session)})")
        self.input = ins[0].name
        self.runner = BatchRun(self.session)
        self.providers = list(self.session.get_providers())

    def __call__(self, crops_rgb: np.ndarray) -> np.ndarray:
        """(N,512,512,3) uint8 RGB -> (N,512,512) int class labels."""
        x = (crops_rgb.astype(np.float32) / 255.0 - _MEAN) / _STD
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
        first = self.session.get_outputs()[0].name
        y = self.runner({self.input: x}, [first])[0]
        # torch's exporter leaves the interpolated output's dims symbolic: check them here.
        if y.shape[1:] != (PARSER_CLASSES, PARSER_SIZE, PARSER_SIZE):
            raise BadModelError(self.path, f"its first output is {list(y.shape)}, a BiSeNet face parser gives "
                                           "[N,19,512,512]")
        return y.argmax(axis=1)


def load_occluder(path: str, provider: str = "auto") -> Occluder:
    return cached("xseg-occluder", path, (provider,), lambda: Occluder(path, provider))


def load_parser(path: str, provider: str = "auto") -> Parser:
    return cached("bisenet-parser", path, (provider,), lambda: Parser(path, provider))
