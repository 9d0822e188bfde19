"""Content-safety recheck: a user-supplied image classifier scores every evaluated output frame.

The seed architecture's post-generation check. No model is bundled: the user puts an ONNX image
classifier in ``models/swapline_safety/``. Its scores go into the QA report (per frame) and the
chart; a frame scoring above the limit makes the job's decision "fail" (so the "fail job" policy
stops it), but the check never drops, replaces or alters a frame: reverting a frame to the
*original* clip is no answer to unsafe content, a person has to look.

Expected model signature (checked at load, with a clear error otherwise):

- one input, float32, NCHW ``[N or 1, 3, H, W]`` with fixed H and W: the whole frame, RGB,
  resized (aspect not kept) to W x H, values in 0..1, or ImageNet-normalised when the model's
  metadata says ``swapline.normalize = imagenet``;
- one output ``[N, C]`` (C >= 1): per-class scores. Probabilities by default; with metadata
  ``swapline.scores = logits`` a softmax is applied (C > 1) or a sigmoid (C = 1).
- which class is "unsafe": the ``unsafe_class`` setting, or else the model's metadata
  ``swapline.unsafe_class`` (an index); ``swapline.labels`` (comma-separated) names the classes
  in the report. A single-output model (C = 1) scores "unsafe" directly.
"""
from __future__ import annotations

import os
from collections.abc import Sequence

import cv2
import numpy as np

from ..errors import BadModelError, SwaplineError

_IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
_IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)
BATCH = 8


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


class SafetyClassifier:
    """An ONNX image classifier with the signature above; ``score(frames)`` -> unsafe score per frame."""

    def __init__(self, path: str, unsafe_class: int | None = None, provider: str = "auto", session=None):
        from ..backends.onnx_sessions import create_session

        self.path = path
        self.sess = session if session is not None else create_session(path, provider)
        ins, outs = self.sess.get_inputs(), self.sess.get_outputs()
        if len(ins) != 1 or len(outs) < 1:
            raise BadModelError(path, f"a content-safety classifier has one image input and a score output; this "
                                      f"one has {len(ins)} inputs and {len(outs)} outputs")
        shape = list(ins[0].shape)
        if len(shape) != 4 or shape[1] != 3 or not all(isinstance(v, int) and v > 0 for v in shape[2:]):
            raise BadModelError(path, f"expected an NCHW float RGB input [N, 3, H, W] with fixed H and W; the "
                                      f"model's input '{ins[0].name}' is {shape}")
        if "float" not in ins[0].type:
            raise BadModelError(path, f"expected a float input, the model's is {ins[0].type}")
        self.input_name, self.size = ins[0].name, (int(shape[3]), int(shape[2]))     # (W, H)
        self.fixed_batch = shape[0] if isinstance(shape[0], int) else None
        meta = dict(self.sess.get_modelmeta().custom_metadata_map or {})
        self.normalize = meta.get("swapline.normalize", "0-1")
        if self.normalize not in ("0-1", "imagenet"):
            raise BadModelError(path, "metadata swapline.normalize must be '0-1' or 'imagenet', not "
                                      f"{self.normalize!r}")
        self.logits = meta.get("swapline.scores", "probabilities") == "logits"
        self.labels = [s.strip() for s in meta["swapline.labels"].split(",")] if meta.get("swapline.labels") else []
        if unsafe_class is None or unsafe_class < 0:
            if "swapline.unsafe_class" not in meta:
                unsafe_class = None
            else:
                try:
                    unsafe_class = int(meta["swapline.unsafe_class"])
                except ValueError:
                    raise BadModelError(path, "metadata swapline.unsafe_class must be a class index, not "
                                              f"{meta['swapline.unsafe_class']!r}") from None
        self.unsafe_class = unsafe_class
        self.name = os.path.basename(path)
        self.classes: int | None = None

    @property
    def key(self) -> list:
        """What the scores depend on (the QA stage's resume key)."""
        from ..backends.cache import file_identity

        return [self.name, list(file_identity(self.path)), self.unsafe_class, self.normalize, self.logits]

    def describe(self) -> dict:
        label = (self.labels[self.unsafe_class] if self.unsafe_class is not None
                 and 0 <= self.unsafe_class < len(self.labels) else None)
        return {"model": self.name, "input": [3, self.size[1], self.size[0]], "normalize": self.normalize,
                "unsafe_class": self.unsafe_class, "unsafe_label": label}

    def _prepare(self, frames: Sequence[np.ndarray]) -> np.ndarray:
        x = np.stack([cv2.resize(f, self.size, interpolation=cv2.INTER_AREA) for f in frames])
        x = x.astype(np.float32).transpose(0, 3, 1, 2) / 255.0
        if self.normalize == "imagenet":
            x = (x - _IMAGENET_MEAN) / _IMAGENET_STD
        return np.ascontiguousarray(x)

    def _unsafe(self, out: np.ndarray) -> np.ndarray:
        out = np.asarray(out, np.float32).reshape(len(out), -1)
        c = out.shape[1]
        if self.classes is None:
            self.classes = c
            if c > 1 and self.unsafe_class is None:
                raise SwaplineError(
                    f"content-safety model {self.name} has {c} classes and its metadata does not say which one is "
                    "unsafe (swapline.unsafe_class): set unsafe_class on Load Safety Classifier (Swapline)")
            if c > 1 and not 0 <= self.unsafe_class < c:
                raise SwaplineError(f"unsafe_class {self.unsafe_class} is out of range: {self.name} has {c} classes "
                                    f"(0..{c - 1})")
        if self.logits:
            out = _softmax(out) if c > 1 else 1.0 / (1.0 + np.exp(-out))
        return out[:, 0] if c == 1 else out[:, self.unsafe_class]

    def score(self, frames: Sequence[np.ndarray]) -> list[float]:
        """Unsafe score per frame (RGB uint8, any size), in order."""
        scores: list[float] = []
        step = self.fixed_batch or BATCH
        for i in range(0, len(frames), step):
            part = list(frames[i:i + step])
            x = self._prepare(part)
            if self.fixed_batch and len(part) < self.fixed_batch:  # pad a fixed-batch model's last call
                x = np.concatenate([x, np.repeat(x[-1:], self.fixed_batch - len(part), 0)])
            out = self.sess.run(None, {self.input_name: x})[0]
            scores += [float(v) for v in self._unsafe(out)[:len(part)]]
        return scores


def summarize(records: Sequence[dict], limit: float, model: dict | None = None) -> dict | None:
    """The report's ``safety`` block (None when no frame was scored): the model, the limit, the
    highest score and the frames above the limit."""
    scored = [(r["frame"], r["safety"]) for r in records if r.get("safety") is not None]
    if not scored:
        return None
    return {**(model or {}), "max_safety_score": limit, "scored": len(scored),
            "max": round(max(s for _, s in scored), 4), "flagged_frames": [i for i, s in scored if s > limit]}
