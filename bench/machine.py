"""What the numbers were measured on (versions, cores, load), recorded with every result."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata

from .paths import REPO


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def load_average() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def machine_info() -> dict:
    import psutil

    try:
        import torch
        torch_threads = torch.get_num_threads()
    except ImportError:
        torch_threads = None
    status = _git("status", "--porcelain")
    return {
        "cpu_count": os.cpu_count(),
        "cpu_count_physical": psutil.cpu_count(logical=False),
        "cpu_model": _cpu_model(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": _version("torch"),
        "torch_threads": torch_threads,
        "onnxruntime": _version("onnxruntime") or _version("onnxruntime-gpu"),
        "opencv": _version("opencv-python-headless") or _version("opencv-python")
                  or _version("opencv-contrib-python"),
        "av": _version("av"),
        "dlib": _version("dlib") or _version("dlib-bin"),
        "facenet_pytorch": _version("facenet-pytorch"),
        "insightface": _version("insightface"),
        "numpy": _version("numpy"),
        "git_commit": _git("rev-parse", "--short", "HEAD"),
        "git_dirty": None if status is None else bool(status),
        "load_average_at_start": load_average(),
        "executable": sys.executable,
    }


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None
