"""Refine Faces in Frames with ComfyUI's real loaders and sampler in process (SD1.5 stand-ins of
devtools/synthetic_sd.py, built-in analyzer on the shipped clip): frame count and timing kept, only
face regions change, an interrupted run resumes with the same pixels."""
from __future__ import annotations

from pathlib import Path

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from devtools.inprocess import import_pack, setup_comfy  # noqa: E402

setup_comfy()

from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer  # noqa: E402
from swapline_core.video import stages as pipeline  # noqa: E402
from swapline_core.video.frames import FrameSequence  # noqa: E402

CLIP = Path(__file__).resolve().parents[3] / "assets" / "samples" / "kling_avatar_clip.mp4"
N = 6


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    import comfy.controlnet
    import comfy.sd
    import folder_paths

    from devtools.synthetic_sd import build_sd_models

    out = tmp_path_factory.mktemp("comfy-output")
    folder_paths.set_output_directory(str(out))          # the node's chunk cache goes here
    paths = build_sd_models(tmp_path_factory.mktemp("sd-models"))
    model, clip, vae, _ = comfy.sd.load_checkpoint_guess_config(
        str(paths["checkpoint"]), output_vae=True, output_clip=True, embedding_directory=None)[:4]
    cnet = comfy.controlnet.load_controlnet(str(paths["controlnet"]))
    pos = clip.encode_from_tokens_scheduled(clip.tokenize("a detailed face"))
    neg = clip.encode_from_tokens_scheduled(clip.tokenize("blurry"))
    analyzer = BuiltinAnalyzer()
    seq = FrameSequence.open(str(CLIP), count=N, chunk=2)
    faces, _ = pipeline.track_faces(seq, analyzer, str(tmp_path_factory.mktemp("track")), pipeline.Hooks(),
                                    mode="largest")
    import_pack()
    import swapline.nodes.refine as mod

    return {"mod": mod, "model": model, "vae": vae, "cnet": cnet, "pos": pos, "neg": neg, "analyzer": analyzer,
            "seq": seq, "faces": faces, "out": out}


def run(env, seq=None, **kw):
    args = dict(frames=seq or env["seq"], faces=env["faces"], model=env["model"], positive=env["pos"],
                negative=env["neg"], vae=env["vae"], size="128", template="ffhq", seed=7, steps=2, cfg=4.0,
                sampler_name="euler", scheduler="normal", denoise=0.6, faces_per_batch=8, mask_erode=0.02,
                mask_blur=0.08, hint_format="openpose_face", control_strength=0.8, middle=1.0, output_1=0.7,
                output_2=0.5, rest=1.0, control_net=env["cnet"], analyzer=env["analyzer"])
    args.update(kw)
    res = env["mod"].RefineFrames.execute(**args)
    return res.args[0], res.args[1]


def frames_of(seq):
    return [f for _, chunk in seq.iter_chunks() for f in chunk]


def test_refines_only_the_faces_and_keeps_the_clip(env):
    out, text = run(env)
    assert "refined 6 face crop(s)" in text
    src, ref = frames_of(env["seq"]), frames_of(out)
    assert (out.count, out.fps, out.has_audio, out.path) == (N, env["seq"].fps, env["seq"].has_audio, env["seq"].path)
    assert len(ref) == N
    for a, b, fr in zip(src, ref, env["faces"].frames):
        changed = np.any(a != b, axis=2)
        assert changed.mean() > 0.01                                   # the face was redrawn
        x0, y0, x1, y1 = fr.faces[0].bbox
        w, h = x1 - x0, y1 - y0
        ys, xs = np.nonzero(changed)                                   # and nothing far from it
        assert xs.min() >= x0 - w and xs.max() <= x1 + w and ys.min() >= y0 - h and ys.max() <= y1 + h


def test_interrupted_run_resumes_with_the_same_pixels(env, monkeypatch):
    import comfy.sample

    seq = FrameSequence.open(str(CLIP), count=N, chunk=2)
    full = frames_of(run(env, seq, seed=11)[0])

    class Stop(Exception):
        pass

    calls = {"check": 0, "sample": 0}
    real_check, real_sample = env["mod"].check_interrupt, comfy.sample.sample

    def check():
        calls["check"] += 1
        if calls["check"] == 4:            # chunk 0: stage check + batch check; chunk 1: stage check, then stop
            raise Stop

    monkeypatch.setattr(env["mod"], "check_interrupt", check)
    with pytest.raises(Stop):
        run(env, seq, seed=12)
    monkeypatch.setattr(env["mod"], "check_interrupt", real_check)

    def counting(*a, **k):
        calls["sample"] += 1
        return real_sample(*a, **k)

    monkeypatch.setattr(comfy.sample, "sample", counting)
    resumed, text = run(env, seq, seed=12)
    assert "1 chunk(s) resumed" in text and calls["sample"] == 2     # only chunks 1 and 2 sampled
    monkeypatch.setattr(comfy.sample, "sample", real_sample)
    fresh = FrameSequence.open(str(CLIP), count=N, chunk=2)
    out_dir = env["out"] / "swapline_cache"
    assert out_dir.is_dir()
    # a clean run of seed 12 in a new cache folder gives the same frames as the resumed one
    import folder_paths

    folder_paths.set_output_directory(str(env["out"] / "second"))
    try:
        clean = frames_of(run(env, fresh, seed=12)[0])
    finally:
        folder_paths.set_output_directory(str(env["out"]))
    assert all(np.array_equal(a, b) for a, b in zip(frames_of(resumed), clean))
    assert not all(np.array_equal(a, b) for a, b in zip(full, clean))  # another seed, other pixels


def test_noise_does_not_depend_on_batching(env):
    import folder_paths

    outs = []
    for batch in (1, 4):   # faces_per_batch is not in the cache key (same result): separate caches
        folder_paths.set_output_directory(str(env["out"] / f"batch{batch}"))
        try:
            outs.append(frames_of(run(env, seed=3, faces_per_batch=batch)[0]))
        finally:
            folder_paths.set_output_directory(str(env["out"]))
    assert max(int(np.abs(x.astype(int) - y).max()) for x, y in zip(*outs)) <= 2


def test_68_point_hints_need_an_analyzer_with_landmarks(env):
    from swapline.swapline_core.errors import SwaplineError

    with pytest.raises(SwaplineError, match="68-point landmarks"):
        run(env, analyzer=None)
    out, _ = run(env, analyzer=None, hint_format="5_point")          # 5 keypoints are always there
    assert out.count == N
