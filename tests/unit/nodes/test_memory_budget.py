"""Memory budgets (nodes/memory.py) against the ComfyUI under test: 0.3.75 (free memory only) and
0.33 (free memory plus what Dynamic VRAM would evict, the figure core's VAE encode batches by).

CI has no GPU, so the CUDA cases pin the two hardware readings (free VRAM, evictable VRAM) to
known numbers; everything else is ComfyUI's own code, compared with core's ModelPatcher."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import psutil
import pytest
import torch

from devtools.inprocess import import_pack, setup_comfy

setup_comfy()
import comfy.model_management as mm
import comfy.model_patcher
import comfy.ops

GiB = 1024 ** 3
CUDA = torch.device("cuda", 0)
DYNAMIC = hasattr(comfy.model_patcher.ModelPatcher, "get_free_memory")   # ComfyUI >= 0.16


@pytest.fixture(scope="module")
def memory():
    import_pack()
    import swapline.nodes.memory as mod

    return mod


@pytest.fixture
def vram(monkeypatch):
    """Pretend CUDA device 0 has 1 GiB free (only that reading; ComfyUI's code is unchanged)."""
    real = mm.get_free_memory

    def free(dev=None, torch_free_too=False):
        if dev is not None and torch.device(dev).type == "cuda":
            return (GiB, 0) if torch_free_too else GiB
        return real(dev, torch_free_too)

    monkeypatch.setattr(mm, "get_free_memory", free)


def test_cpu_budget_is_the_free_ram_comfy_reports(memory):
    got = memory.available_memory("cpu")
    assert abs(got - mm.get_free_memory(torch.device("cpu"))) < 512 * 1024 ** 2
    assert abs(got - psutil.virtual_memory().available) < 512 * 1024 ** 2
    assert memory.evictable_memory("cpu") == 0


@pytest.mark.skipif(DYNAMIC, reason="ComfyUI 0.3.75 behaviour")
def test_0375_budget_is_free_memory_only(memory, vram):
    assert memory.evictable_memory(CUDA) == 0
    assert memory.available_memory(CUDA) == GiB


@pytest.mark.skipif(not DYNAMIC, reason="ComfyUI predates Dynamic VRAM (0.16)")
def test_dynamic_vram_budget_matches_core_encode(memory, vram, monkeypatch):
    import comfy.memory_management
    from comfy_aimdo import model_vbar

    patcher = comfy.model_patcher.ModelPatcher(comfy.ops.disable_weight_init.Linear(4, 4), load_device=CUDA,
                                               offload_device=torch.device("cpu"))
    # Dynamic VRAM off (e.g. --disable-dynamic-vram, or not NVIDIA): free memory only, like core
    monkeypatch.setattr(comfy.memory_management, "aimdo_enabled", False)
    assert memory.available_memory(CUDA) == patcher.get_free_memory(CUDA) == GiB

    # on, with no GPU: comfy_aimdo's real query answers 0 (and takes the arguments we pass)
    monkeypatch.setattr(comfy.memory_management, "aimdo_enabled", True)
    assert memory.evictable_memory(CUDA) == 0 == model_vbar.vbars_analyze(0)

    # on, with 3 GiB of weights it would evict: counted, exactly as core's encode counts it
    asked = []
    monkeypatch.setattr(model_vbar, "vbars_analyze", lambda device=None: asked.append(device) or 3 * GiB)
    assert memory.available_memory(CUDA) == patcher.get_free_memory(CUDA) == 4 * GiB
    assert asked == [0, 0]
    assert memory.available_memory(torch.device("cuda")) == 4 * GiB     # default device -> None
    assert asked[-1] is None
    # VRAM eviction never counts towards host RAM
    assert memory.evictable_memory("cpu") == 0


@pytest.mark.skipif(not DYNAMIC, reason="ComfyUI predates Dynamic VRAM (0.16)")
def test_tiled_vae_auto_budget_counts_evictable_vram(memory, vram, monkeypatch):
    """The tiled VAE's auto mode plans with the evictable VRAM (a CUDA VAE, faked as far as its device)."""
    import comfy.memory_management
    import swapline.nodes.vae as vae_node
    from comfy_aimdo import model_vbar

    class FakeVae:                      # only what _budget reads; load_models_gpu is stubbed below
        device = CUDA
        patcher = None
        disable_offload = False

    enc = vae_node.VaeEncoder.__new__(vae_node.VaeEncoder)
    enc.vae = FakeVae()
    monkeypatch.setattr(mm, "load_models_gpu", lambda *a, **k: None)
    monkeypatch.setattr(comfy.memory_management, "aimdo_enabled", True)
    monkeypatch.setattr(model_vbar, "vbars_analyze", lambda device=None: 3 * GiB)
    assert enc._budget(0) == pytest.approx(4 * GiB * vae_node.BUDGET_FRACTION)
    monkeypatch.setattr(comfy.memory_management, "aimdo_enabled", False)
    assert enc._budget(0) == pytest.approx(1 * GiB * vae_node.BUDGET_FRACTION)


def test_auto_chunk_uses_the_budget(memory, monkeypatch):
    import swapline.nodes.video as video_node

    monkeypatch.setattr(memory, "available_memory", lambda dev: 10 * GiB)
    per_frame = 1920 * 1080 * 3 * 8
    assert video_node.auto_chunk(1920, 1080) == int(10 * GiB * 0.05 // per_frame) == 10
