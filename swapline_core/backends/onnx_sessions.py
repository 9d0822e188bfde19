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
                "onnxruntime (docs/models.md#gpu-inference-onnxruntime) or choose 'auto'.")
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


def unloadable_model(path: str, exc: BaseException):
    """A BadModelError for an ONNX file onnxruntime cannot read: size, what was expected, what to do.

    onnxruntime's own text ("[ONNXRuntimeError] : 7 : INVALID_PROTOBUF : Load model from ...
    failed:Protobuf parsing failed.") says nothing a user can act on, and names server paths.
    """
    import os

    from ..errors import BadModelError
    from .catalog import KNOWN_MODELS

    size = os.path.getsize(path) if os.path.isfile(path) else None
    known = next((m for m in KNOWN_MODELS if m.filename == os.path.basename(path)), None)
    found = "it is empty (0 bytes)" if size == 0 else f"it has {size} bytes" if size is not None else "it is unreadable"
    expected = ""
    if known is not None and known.size_bytes:
        expected = f"; the published file has {known.size_bytes} bytes"
        if known.sha256:
            expected += f" and sha256 {known.sha256}"
    kind = type(exc).__name__
    detail = "INVALID_PROTOBUF" if "protobuf" in str(exc).lower() else kind
    return BadModelError(path, f"onnxruntime cannot load it as an ONNX model ({detail}): {found}{expected}. "
                               "The download is probably incomplete or corrupt: download it again "
                               "(see docs/models.md).")


def create_session(path: str, choice: str = "auto"):
    import onnxruntime as ort

    providers = providers_for(choice)  # its own clear error for a missing CUDA provider
    try:
        return ort.InferenceSession(path, sess_options=session_options(), providers=providers)
    except Exception as exc:  # onnxruntime raises several types for unreadable graphs
        raise unloadable_model(path, exc) from exc
