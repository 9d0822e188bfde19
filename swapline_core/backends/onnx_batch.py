"""One ONNX session run over many faces or frames: batches, IO binding on the GPU, what was used.

A graph whose batch dimension is dynamic takes up to ``max_batch`` items per run (all faces of a
chunk, all frames of a detector batch); one whose batch is fixed at 1 (most published files) is
run item by item, and the report says so, so "batch 32" is never claimed for a file that cannot
take it. On CUDA/TensorRT sessions inputs and outputs are bound through onnxruntime's IO binding
(one host-to-device copy per input, outputs fetched once after the run) instead of ``run``'s
per-call staging; on CPU plain ``run`` is used unless binding is asked for (tests compare both).
Results are concatenated in item order, so callers see one array per output whatever the slicing;
half-precision graphs get their inputs cast to fp16 and give float32 back.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .onnx_sessions import GPU_PROVIDERS

DEFAULT_MAX_BATCH = 32
# ONNX element types -> what a run hands back (fp16 outputs are given back as float32)
_DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float32, "tensor(double)": np.float64,
           "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(uint8)": np.uint8,
           "tensor(int8)": np.int8, "tensor(bool)": np.bool_}


def fixed_batch(shape: Sequence) -> bool:
    """True when an ONNX shape's first dimension is a fixed number (1 in published single-face files)."""
    return bool(shape) and isinstance(shape[0], int) and shape[0] >= 1


class BatchRun:
    def __init__(self, session, max_batch: int = DEFAULT_MAX_BATCH, io_binding: bool | None = None):
        self.session = session
        inputs = session.get_inputs()
        self.fixed = any(fixed_batch(i.shape) for i in inputs)
        self.max_batch = 1 if self.fixed else max(1, int(max_batch))
        first = (session.get_providers() or ["CPUExecutionProvider"])[0]
        self.device = "cuda" if first in GPU_PROVIDERS else "cpu"
        self.io_binding = self.device == "cuda" if io_binding is None else bool(io_binding)
        # fp16 files (inswapper_128_fp16, FaceFusion's *_fp16) take half inputs: callers hand float32
        self.half_inputs = {i.name for i in inputs if "float16" in (i.type or "")}
        self.runs = 0
        self.items = 0
        self.largest = 0
        self._rows: dict = {}   # row shapes of symbolic outputs, for empty feeds (_empty)

    def __call__(self, feeds: dict[str, np.ndarray], outputs: Sequence[str] | None = None,
                 max_batch: int | None = None) -> list[np.ndarray]:
        """One array per output (all of them, or ``outputs``), rows in the order of the feeds' rows."""
        n = len(next(iter(feeds.values())))
        step = 1 if self.fixed else max(1, int(max_batch or self.max_batch))
        names = list(outputs) if outputs else [o.name for o in self.session.get_outputs()]
        parts = []
        for s in range(0, n, step):
            part = {k: np.ascontiguousarray(v[s:s + step], np.float16 if k in self.half_inputs else None)
                    for k, v in feeds.items()}
            parts.append([y.astype(np.float32) if y.dtype == np.float16 else y for y in self._run(part, names)])
            self.runs += 1
            self.items += min(step, n - s)
            self.largest = max(self.largest, min(step, n - s))
        if not parts:
            return self._empty(feeds, names)
        return [np.concatenate([p[i] for p in parts]) if len(parts) > 1 else parts[0][i] for i in range(len(names))]

    def _empty(self, feeds: dict[str, np.ndarray], names: list[str]) -> list[np.ndarray]:
        """Zero rows of each output, shaped as a row of a real run: ``(0, *row)``, float32 where the
        graph gives fp16 (as for real runs). Callers index rows (``[:, 0]``, a transpose, a check of
        the class axis); a shapeless ``(0,)`` broke them only when a chunk had no face (issue 50).
        Rows the graph declares are taken from it; symbolic ones (an exporter's interpolated dims)
        from one zero row run once per input shape, kept, and not counted in the report."""
        outs = {o.name: o for o in self.session.get_outputs()}
        rows = [tuple(outs[n].shape[1:]) for n in names]
        types = [_DTYPES.get(outs[n].type) for n in names]
        if all(t is not None for t in types) and all(isinstance(d, int) and d >= 0 for r in rows for d in r):
            return [np.zeros((0, *r), t) for r, t in zip(rows, types)]
        key = (tuple(names), tuple((k, v.shape[1:], v.dtype.str) for k, v in feeds.items()))
        if key not in self._rows:
            one = {k: np.zeros((1, *v.shape[1:]), np.float16 if k in self.half_inputs else v.dtype)
                   for k, v in feeds.items()}
            self._rows[key] = [(y.shape[1:], np.float32 if y.dtype == np.float16 else y.dtype)
                               for y in self._run(one, names)]
        return [np.zeros((0, *r), t) for r, t in self._rows[key]]

    def _run(self, feeds: dict[str, np.ndarray], names: list[str]) -> list[np.ndarray]:
        if not self.io_binding:
            return self.session.run(names, feeds)
        import onnxruntime as ort

        binding = self.session.io_binding()
        for k, v in feeds.items():
            binding.bind_ortvalue_input(k, ort.OrtValue.ortvalue_from_numpy(v, self.device, 0))
        for name in names:
            binding.bind_output(name, self.device, 0)
        self.session.run_with_iobinding(binding)
        return binding.copy_outputs_to_cpu()

    def report(self) -> dict:
        """What the stage report shows beside the providers: the batch really used and how."""
        return {"max_batch": self.max_batch,
                "largest_batch_run": self.largest,
                "mean_batch": round(self.items / self.runs, 2) if self.runs else None,
                "batch_fixed_by_graph": self.fixed,
                "io_binding": self.io_binding}
