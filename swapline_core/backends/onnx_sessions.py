"""ONNX Runtime provider choice and the truth about what each session really got.

onnxruntime(-gpu) silently falls back to CPU when CUDA cannot start, so every caller reports
``session.get_providers()`` rather than what it asked for.
"""
from __future__ import annotations

PROVIDER_CHOICES = ("auto", "CPU", "CUDA")


def providers_for(choice: str) -> list[str]:
    import onnxruntime as ort

    available = ort.get_available_providers()
    if choice == "CPU":
        return ["CPUExecutionProvider"]
    if choice == "CUDA":
        if "CUDAExecutionProvider" not in available:
            raise RuntimeError(
                "CUDA was requested but this onnxruntime has no CUDAExecutionProvider "
                f"(available: {', '.join(available)}). Install onnxruntime-gpu in place of "
                "onnxruntime (README, 'GPU inference') or choose 'auto'.")
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    preferred = [p for p in ("CUDAExecutionProvider",) if p in available]
    return preferred + ["CPUExecutionProvider"]


def session_options(threads: int = 0):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    if threads:
        so.intra_op_num_threads = threads
    return so


def create_session(path: str, choice: str = "auto"):
    import onnxruntime as ort

    return ort.InferenceSession(path, sess_options=session_options(), providers=providers_for(choice))
