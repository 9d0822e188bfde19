"""Apply Face ControlNet, checked where it matters: the control residuals the UNet receives and
the blocks that add them, in a real ComfyUI sampling run (SD1.5-architecture UNet and ControlNet
loaded by ComfyUI's own loaders from devtools/synthetic_sd.py's small checkpoints)."""
from __future__ import annotations

import pytest  # noqa: E402
import torch  # noqa: E402

from devtools.inprocess import import_pack, setup_comfy  # noqa: E402

setup_comfy()

LATENT = 32          # latent side: 256 px images


@pytest.fixture(scope="module")
def sd(tmp_path_factory):
    import comfy.controlnet
    import comfy.sd

    from devtools.synthetic_sd import build_sd_models

    paths = build_sd_models(tmp_path_factory.mktemp("sd-models"))
    model, clip, _vae, _ = comfy.sd.load_checkpoint_guess_config(
        str(paths["checkpoint"]), output_vae=False, output_clip=True, embedding_directory=None)[:4]
    cnet = comfy.controlnet.load_controlnet(str(paths["controlnet"]))
    return model, clip, cnet


@pytest.fixture(scope="module")
def node_mod():
    import_pack()
    import swapline.nodes.controlnet as mod

    return mod


def encode(clip, text: str):
    tokens = clip.tokenize(text)
    return clip.encode_from_tokens_scheduled(tokens)


def hint_image(batch: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(3)
    img = torch.zeros(batch, LATENT * 8, LATENT * 8, 3)
    img[:, 60:200, 70:190] = torch.rand(batch, 140, 120, 3, generator=g)
    return img


def first_call(model, positive, negative, batch: int = 1, taps=None):
    """Run one sampling step; return the control dict the UNet got on its first call (cloned)."""
    import comfy.sample

    got = []

    def wrapper(apply_model, args):
        ctrl = args["c"].get("control")
        if not got:
            got.append(None if ctrl is None else
                       {k: [None if t is None else t.detach().clone() for t in v] for k, v in ctrl.items()})
        return apply_model(args["input"], args["timestep"], **args["c"])

    m = model.clone()
    m.set_model_unet_function_wrapper(wrapper)
    latent = torch.zeros(batch, 4, LATENT, LATENT)
    noise = comfy.sample.prepare_noise(latent, 0)
    with torch.inference_mode():
        comfy.sample.sample(m, noise, 1, 4.0, "euler", "normal", positive, negative, latent, denoise=1.0, seed=0)
    return got[0]


def core_apply(cnet, positive, negative, hint, strength):
    """What core ControlNetApplyAdvanced does (its code, not imported: the repo's `nodes` shadows it)."""
    out = []
    c_net = cnet.copy().set_cond_hint(hint.movedim(-1, 1), strength, (0.0, 1.0))   # one object for both, as core
    for cond in (positive, negative):
        out.append([[e, {**o, "control": c_net, "control_apply_to_uncond": False}] for e, o in cond])
    return out


def ours(node_mod, cnet, positive, negative, hint, strength=0.8, middle=1.0, o1=0.7, o2=0.5, rest=1.0, mask=None):
    res = node_mod.ApplyFaceControlNet.execute(positive=positive, negative=negative, control_net=cnet, hint=hint,
                                               strength=strength, start_percent=0.0, end_percent=1.0, middle=middle,
                                               output_1=o1, output_2=o2, rest=rest, mask=mask)
    return res.args[0], res.args[1]


def test_block_schedule_reaches_the_unet(sd, node_mod):
    model, clip, cnet = sd
    pos, neg = encode(clip, "a face"), encode(clip, "")
    hint = hint_image()
    core = first_call(model, *core_apply(cnet, pos, neg, hint, 0.8))
    got = first_call(model, *ours(node_mod, cnet, pos, neg, hint, middle=0.9, o1=0.7, o2=0.5, rest=1.0))
    n = len(core["output"])
    assert n >= 3 and len(got["output"]) == n
    assert all(t.abs().max() > 0 for t in core["output"] + core["middle"])     # the control is not zero
    torch.testing.assert_close(got["middle"][0], 0.9 * core["middle"][0])
    torch.testing.assert_close(got["output"][n - 1], 0.7 * core["output"][n - 1])   # first output block's
    torch.testing.assert_close(got["output"][n - 2], 0.5 * core["output"][n - 2])   # second output block's
    for i in range(n - 2):
        torch.testing.assert_close(got["output"][i], core["output"][i])


def test_face_mask_confines_the_control(sd, node_mod):
    model, clip, cnet = sd
    pos, neg = encode(clip, "a face"), encode(clip, "")
    hint = hint_image()
    mask = torch.zeros(1, LATENT * 8, LATENT * 8)
    mask[:, :, : LATENT * 4] = 1.0                                           # left half of the image
    core = first_call(model, *core_apply(cnet, pos, neg, hint, 1.0))
    got = first_call(model, *ours(node_mod, cnet, pos, neg, hint, strength=1.0, o1=1.0, o2=1.0, mask=mask))
    for key in ("middle", "output"):
        for a, b in zip(got[key], core[key]):
            w = a.shape[-1]
            assert a[..., w // 2:].abs().max() == 0                          # nothing right of the face
            torch.testing.assert_close(a[..., : w // 2], b[..., : w // 2])   # untouched inside


def test_output_blocks_add_the_scaled_residuals(sd, node_mod):
    """Inside the UNet: the skip each output block concatenates = input block output + residual."""
    model, clip, cnet = sd
    pos, neg = encode(clip, "a face"), encode(clip, "")
    unet = model.model.diffusion_model
    block_out, skip_in = {}, {}

    def keep_out(i):
        def hook(_mod, _args, out):
            block_out.setdefault(i, out.detach().clone())
        return hook

    def keep_in(k):
        def hook(_mod, args):
            skip_in.setdefault(k, args[0].detach().clone())
        return hook

    handles = [unet.input_blocks[i][-1].register_forward_hook(keep_out(i)) for i in range(len(unet.input_blocks))]
    handles += [unet.output_blocks[k][0].register_forward_pre_hook(keep_in(k)) for k in range(3)]
    try:
        got = first_call(model, *ours(node_mod, cnet, pos, neg, hint_image(), strength=1.0, o1=0.0, o2=0.5))
    finally:
        for h in handles:
            h.remove()
    n = len(unet.input_blocks)
    assert len(got["output"]) == n
    for k, factor in ((0, 0.0), (1, 0.5), (2, 1.0)):
        skip_plain = block_out[n - 1 - k]
        skip_seen = skip_in[k][:, -skip_plain.shape[1]:]
        residual = got["output"][n - 1 - k]
        torch.testing.assert_close(skip_seen - skip_plain, residual, atol=1e-4, rtol=1e-4)
        assert (residual.abs().max() == 0) == (factor == 0.0)


def test_chained_controlnets_keep_the_earlier_one_unscaled(sd, node_mod):
    model, clip, cnet = sd
    pos, neg = encode(clip, "a face"), encode(clip, "")
    hint = hint_image()
    first = core_apply(cnet, pos, neg, hint, 0.5)
    alone = first_call(model, *first)
    ours_only = first_call(model, *ours(node_mod, cnet, pos, neg, hint, strength=0.8, o1=0.0, o2=0.0))
    chained = first_call(model, *ours(node_mod, cnet, first[0], first[1], hint, strength=0.8, o1=0.0, o2=0.0))
    n = len(alone["output"])
    torch.testing.assert_close(chained["output"][n - 1], alone["output"][n - 1])   # ours is 0 there
    torch.testing.assert_close(chained["middle"][0], alone["middle"][0] + ours_only["middle"][0])


def test_batch_of_masks_follows_the_latents(sd, node_mod):
    model, clip, cnet = sd
    pos, neg = encode(clip, "a face"), encode(clip, "")
    hint = hint_image(2)
    mask = torch.zeros(2, LATENT * 8, LATENT * 8)
    mask[0] = 1.0                                                             # first image only
    got = first_call(model, *ours(node_mod, cnet, pos, neg, hint, strength=1.0, mask=mask), batch=2)
    mid = got["middle"][0]                              # cond (2) [+ uncond (2) when batched together]
    assert mid.shape[0] in (2, 4)
    for i in range(mid.shape[0]):
        assert (mid[i].abs().max() > 0) == (i % 2 == 0), i


def test_bad_settings_are_named(sd, node_mod):
    from swapline.swapline_core.errors import SwaplineError

    _, clip, cnet = sd
    pos, neg = encode(clip, "a face"), encode(clip, "")
    with pytest.raises(SwaplineError, match="start_percent"):
        node_mod.ApplyFaceControlNet.execute(positive=pos, negative=neg, control_net=cnet, hint=hint_image(),
                                             strength=1.0, start_percent=0.6, end_percent=0.5, middle=1.0,
                                             output_1=0.7, output_2=0.5, rest=1.0)
    with pytest.raises(SwaplineError, match="3 masks for 2 hints"):
        ours(node_mod, cnet, pos, neg, hint_image(2), mask=torch.ones(3, 8, 8))
    p2, n2 = ours(node_mod, cnet, pos, neg, hint_image(), strength=0.0)
    assert p2 is pos and n2 is neg                                            # strength 0: untouched
