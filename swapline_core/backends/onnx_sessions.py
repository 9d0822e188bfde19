"""ONNX Runtime provider choice, the truth about what each session really got, and batched runs.

onnxruntime(-gpu) silently falls back to CPU when CUDA cannot start, so every caller reports
``session.get_providers()`` rather than what it asked for.

Provider choices: ``auto`` (CUDA when this onnxruntime has it, else CPU), ``CPU``, ``CUDA``,
``TensorRT`` and ``TensorRT fp16`` (onnxruntime's TensorRT EP, CUDA then CPU behind it; fp16 lets
TensorRT build half-precision engines from an fp32 file). Building a TensorRT engine takes minutes,
so engines are cached: a choice may carry the cache folder as ``"TensorRT:<folder>"`` (the nodes
pass ComfyUI's user folder, ``user/swapline/trt_engines``); without one the engines are cached in
``trt_engines/`` beside the model file. Each TensorRT session also gets an optimisation profile
for the batch sizes it will see (``create_session``'s ``batches``; ``trt_profile.py``).
"""
from __future__ import annotations

import functools
import logging
import os

log = logging.getLogger("swapline")

PROVIDER_CHOICES = ("auto", "CPU", "CUDA", "TensorRT", "TensorRT fp16")
TRT_PROVIDER = "TensorrtExecutionProvider"
GPU_PROVIDERS = ("CUDAExecutionProvider", TRT_PROVIDER)


def split_choice(choice: str) -> tuple[str, str | None]:
    """("TensorRT fp16", "/cache") from "TensorRT fp16:/cache"; (choice, None) without a folder."""
    name, sep, folder = choice.partition(":")
    return (name, folder or None) if sep else (choice, None)


def with_engine_cache(choice: str, folder: str) -> str:
    """The choice with its TensorRT engine cache folder attached (other choices unchanged)."""
    name, _ = split_choice(choice)
    return f"{name}:{folder}" if name.startswith("TensorRT") else name


def _cuda_missing(choice: str, available: list[str], provider: str = "CUDAExecutionProvider") -> RuntimeError:
    return RuntimeError(
        f"{choice} was requested but this onnxruntime has no {provider} "
        f"(available: {', '.join(available)}). Install onnxruntime-gpu in place of "
        "onnxruntime (docs/models.md#gpu-inference-onnxruntime) or choose 'auto'.")


@functools.cache
def _preload_cuda_libraries() -> None:
    """onnxruntime-gpu >= 1.21 finds the CUDA/cuDNN libraries torch's wheels carry only once asked
    (``preload_dlls``); without it a CUDA session silently falls back to CPU."""
    import onnxruntime as ort

    if hasattr(ort, "preload_dlls"):
        try:
            ort.preload_dlls()
        except Exception as exc:  # a missing library: the session then reports CPU, which we show
            log.warning("onnxruntime could not preload the CUDA libraries: %s", exc)


def is_tensorrt(choice: str) -> bool:
    return split_choice(choice)[0] in ("TensorRT", "TensorRT fp16")


def providers_for(choice: str, model_dir: str | None = None, profile: dict[str, str] | None = None) -> list:
    """The providers list for ``InferenceSession``: names, or (name, options) for TensorRT.
    ``profile``: the session's ``trt_profile_*_shapes`` options (trt_profile.py), TensorRT only."""
    import onnxruntime as ort

    available = ort.get_available_providers()
    if choice != "CPU" and "CUDAExecutionProvider" in available:
        _preload_cuda_libraries()
    name, cache = split_choice(choice)
    if name == "CPU":
        return ["CPUExecutionProvider"]
    if name == "CUDA":
        if "CUDAExecutionProvider" not in available:
            raise _cuda_missing(name, available)
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    if name in ("TensorRT", "TensorRT fp16"):
        if TRT_PROVIDER not in available:
            raise _cuda_missing(name, available, TRT_PROVIDER)
        if cache is None:
            cache = os.path.join(os.path.abspath(model_dir or "."), "trt_engines")
        os.makedirs(cache, exist_ok=True)
        options = {"trt_engine_cache_enable": True, "trt_engine_cache_path": cache,
                   "trt_fp16_enable": name == "TensorRT fp16", **(profile or {})}
        return [(TRT_PROVIDER, options), "CUDAExecutionProvider", "CPUExecutionProvider"]
    if name != "auto":
        raise ValueError(f"unknown provider choice '{choice}'; known: {', '.join(PROVIDER_CHOICES)}")
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


def create_session(path: str, choice: str = "auto", batches=None, dims: dict[int, int] | None = None):
    """A session for ``path``. ``batches`` (trt_profile.Batches; default: a chunk's faces) and
    ``dims`` (axis -> size for other dynamic axes) give a TensorRT session its profile."""
    import onnxruntime as ort

    profile = None
    if is_tensorrt(choice):
        from .trt_profile import FACES, profile_for  # here: trt_profile imports onnx_batch, which imports us

        profile = profile_for(path, batches or FACES, dims)
    # providers_for raises its own clear error for a missing CUDA/TensorRT provider
    providers = providers_for(choice, os.path.dirname(os.path.abspath(path)), profile)
    try:
        return ort.InferenceSession(path, sess_options=session_options(), providers=providers)
    except Exception as exc:  # onnxruntime raises several types for unreadable graphs
        raise unloadable_model(path, exc) from exc
