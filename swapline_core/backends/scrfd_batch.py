"""SCRFD detection on a batch of frames in one run, for detector files exported with a batch dimension.

insightface's ``SCRFD.detect`` runs one image per call. A detector exported with a batch axis
(3-D outputs, ``SCRFD.batched``; insightface's scrfd2onnx can export one) takes a whole chunk of
detector frames at once here: each frame is letterboxed exactly as ``SCRFD.detect`` does it
(resized into the input keeping its aspect, top-left, zero padding), the batch goes through the
session in one run, and each frame's outputs are decoded as insightface decodes them (anchor
centres per stride, distances in stride units, the detector's own NMS). The published
buffalo_l ``det_10g.onnx`` has batch-less 2-D outputs and keeps insightface's per-frame path.
Tests check both paths give the same boxes on the same frames.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .onnx_batch import BatchRun, fixed_batch


def batch_runner(det) -> BatchRun | None:
    """A BatchRun for an insightface SCRFD that can take frame batches at one input size, else None."""
    sizes = list(getattr(det, "input_sizes", None) or [])
    if not getattr(det, "batched", False) or len(sizes) != 1:
        return None
    if fixed_batch(det.session.get_inputs()[0].shape) or det.fmc not in (3, 5):
        return None
    return BatchRun(det.session)


def _letterbox(img: np.ndarray, size: tuple[int, int]) -> tuple[np.ndarray, float]:
    import cv2

    w, h = size
    if img.shape[0] / img.shape[1] > h / w:
        nh, nw = h, int(h / (img.shape[0] / img.shape[1]))
    else:
        nw, nh = w, int(w * (img.shape[0] / img.shape[1]))
    out = np.zeros((h, w, 3), np.uint8)
    out[:nh, :nw] = cv2.resize(img, (nw, nh))
    return out, nh / img.shape[0]


def _centres(h: int, w: int, stride: int, anchors: int) -> np.ndarray:
    c = (np.stack(np.mgrid[:h, :w][::-1], axis=-1).astype(np.float32) * stride).reshape(-1, 2)
    return np.repeat(c, anchors, axis=0) if anchors > 1 else c


def detect_batch(det, runner: BatchRun, images_bgr: Sequence[np.ndarray],
                 threshold: float) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """(det [K,5] boxes + score, kps [K,5,2] or None) per BGR image, as ``SCRFD.detect(img, max_num=0)``."""
    if len(images_bgr) == 0:      # as the per-frame path: no frames, no results (blobFromImages refuses none)
        return []
    import cv2
    from insightface.model_zoo.scrfd import distance2bbox, distance2kps

    size = tuple(det.input_sizes[0])
    boxed = [_letterbox(img, size) for img in images_bgr]
    mean = float(det.input_mean)
    blob = cv2.dnn.blobFromImages([b for b, _ in boxed], 1.0 / det.input_std, size, (mean, mean, mean), swapRB=True)
    outs = runner({det.input_name: np.ascontiguousarray(blob, np.float32)}, det.output_names)
    fmc = det.fmc
    strides, anchors = ((8, 16, 32), 2) if fmc == 3 else ((8, 16, 32, 64, 128), 1)
    results = []
    for i, (_, scale) in enumerate(boxed):
        scores, boxes, kpss = [], [], []
        for idx, stride in enumerate(strides):
            centres = _centres(size[1] // stride, size[0] // stride, stride, anchors)
            s = outs[idx][i].reshape(-1)
            keep = np.where(s >= threshold)[0]
            scores.append(s[keep])
            boxes.append(distance2bbox(centres, outs[idx + fmc][i] * stride)[keep])
            if det.use_kps:
                kpss.append(distance2kps(centres, outs[idx + 2 * fmc][i] * stride).reshape(len(centres), -1, 2)[keep])
        score = np.concatenate(scores)
        if score.size == 0:
            results.append((np.empty((0, 5), np.float32), np.empty((0, 5, 2), np.float32) if det.use_kps else None))
            continue
        order = np.argsort(-score, kind="stable")
        pre = np.hstack((np.vstack(boxes) / scale, score[:, None])).astype(np.float32, copy=False)[order]
        kp = (np.vstack(kpss) / scale)[order] if det.use_kps else None
        keep = det.nms(pre)
        results.append((pre[keep], kp[keep] if kp is not None else None))
    return results
