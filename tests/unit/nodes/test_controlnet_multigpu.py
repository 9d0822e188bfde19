"""Apply Face ControlNet under ComfyUI's MultiGPU path (ComfyUI >= 0.23; CI runs it on 0.33).

core `sampler_helpers.preprocess_multigpu_conds` deep-clones every ControlNet in a cond's chain for
each extra device when the MODEL carries MultiGPU work units, and ControlBase.deepclone_multigpu
raises NotImplementedError unless the subclass implements it. Driven here on CPU: the "extra GPU"
is torch.device("cpu", 1), which ComfyUI treats as a distinct device and torch runs on the CPU.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pytest
import torch

from devtools.inprocess import import_pack, setup_comfy

setup_comfy()
import comfy.sampler_helpers

if not hasattr(comfy.sampler_helpers, "preprocess_multigpu_conds"):
    pytest.skip("this ComfyUI predates MultiGPU (preprocess_multigpu_conds, v0.23)", allow_module_level=True)

LATENT = 32
EXTRA = torch.device("cpu", 1)


@pytest.fixture(scope="module")
def sd(tmp_path_factory):
    import comfy.controlnet
    import comfy.sd

    from devtools.synthetic_sd import build_sd_models

    paths = build_sd_models(tmp_path_factory.mktemp("sd-models-mgpu"))
    model, clip = comfy.sd.load_checkpoint_guess_config(
        str(paths["checkpoint"]), output_vae=False, output_clip=True, embedding_directory=None)[:2]
    return model, clip, comfy.controlnet.load_controlnet(str(paths["controlnet"]))


def encode(clip, text):
    return clip.encode_from_tokens_scheduled(clip.tokenize(text))


def hint_image():
    g = torch.Generator().manual_seed(3)
    img = torch.zeros(1, LATENT * 8, LATENT * 8, 3)
    img[:, 60:200, 70:190] = torch.rand(1, 140, 120, 3, generator=g)
    return img


def chain(cnet, pos, neg):
    """A core ControlNet apply followed by ours (so the chain has a core predecessor to relink)."""
    import_pack()
    import swapline.nodes.controlnet as mod

    hint = hint_image()
    core = cnet.copy().set_cond_hint(hint.movedim(-1, 1), 0.5, (0.0, 1.0))
    first = [[[e, {**o, "control": core, "control_apply_to_uncond": False}] for e, o in c] for c in (pos, neg)]
    mask = torch.zeros(1, LATENT * 8, LATENT * 8)
    mask[:, 40:220, 50:210] = 1.0
    p, n = mod.apply_face_control(first[0], first[1], cnet, hint, 0.8, (0.0, 1.0),
                                  mod.BlockSchedule(middle=0.9, output=(0.7, 0.5), rest=1.0), mask)
    return mod, core, p, n


def first_call(model, positive, negative):
    import comfy.sample

    got = []

    def wrapper(apply_model, args):
        if not got:
            got.append({k: [None if t is None else t.detach().clone() for t in v]
                        for k, v in args["c"]["control"].items()})
        return apply_model(args["input"], args["timestep"], **args["c"])

    m = model.clone()
    m.set_model_unet_function_wrapper(wrapper)
    latent = torch.zeros(1, 4, LATENT, LATENT)
    with torch.inference_mode():
        comfy.sample.sample(m, comfy.sample.prepare_noise(latent, 0), 1, 4.0, "euler", "normal",
                            positive, negative, latent, denoise=1.0, seed=0)
    return got[0]


def test_preprocess_multigpu_conds_clones_the_face_controlnet_per_device(sd):
    model, clip, cnet = sd
    mod, core, pos, neg = chain(cnet, encode(clip, "a face"), encode(clip, ""))
    ours = pos[0][1]["control"]
    assert isinstance(ours, mod.ScheduledControl) and ours.previous_controlnet is core

    before = first_call(model, pos, neg)

    work = model.clone()
    extra = model.clone()
    extra.load_device = EXTRA
    work.set_additional_models("multigpu", [extra])
    conds = {"positive": [o for _, o in pos], "negative": [o for _, o in neg]}
    comfy.sampler_helpers.preprocess_multigpu_conds(conds, work, {})

    clone = ours.get_instance_for_device(EXTRA)
    assert isinstance(clone, mod.ScheduledControl) and clone is not ours
    assert clone.schedule == ours.schedule and clone.mask is ours.mask and clone.strength == ours.strength
    # its own weights on the extra device, and the chain relinked to the core ControlNet's clone
    assert clone.inner.control_model is not ours.inner.control_model
    assert clone.inner.control_model_wrapped.load_device == EXTRA
    assert clone.previous_controlnet is core.get_instance_for_device(EXTRA)
    assert clone.previous_controlnet is not core
    # core loads every device's weights before sampling: ours must list the clone's patcher
    assert EXTRA in {m.load_device for m in ours.get_models()}
    assert ours.inner.multigpu_clones == {}          # only the wrapper in the conds is registered

    # the device chain computes the same residuals as the original chain
    dev = [[e, {**o, "control": o["control"].get_instance_for_device(EXTRA)}] for e, o in pos], \
          [[e, {**o, "control": o["control"].get_instance_for_device(EXTRA)}] for e, o in neg]
    after = first_call(model, *dev)
    assert before.keys() == after.keys()
    for k in before:
        for a, b in zip(before[k], after[k]):
            assert (a is None) == (b is None)
            if a is not None:
                assert a.abs().max() > 0
                torch.testing.assert_close(b, a)
    ours.cleanup()
    assert clone.timestep_range is None              # cleanup reaches the device clones
