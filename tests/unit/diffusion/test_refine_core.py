"""Core helpers behind Refine Faces in Frames: resume-key fingerprints and per-face noise."""
from __future__ import annotations

import numpy as np
import torch

from devtools.lib.nets import tiny_convnet
from swapline_core.diffusion import refine
from swapline_core.diffusion.fingerprint import fingerprint_conditioning, fingerprint_module


def test_module_fingerprint_follows_the_weights():
    a, b = tiny_convnet(), tiny_convnet()
    with torch.no_grad():
        a[2].bias += 1.0                    # a's weights are not the fixed seed's any more
    assert fingerprint_module(a) != fingerprint_module(b)
    b.load_state_dict(a.state_dict())
    assert fingerprint_module(a) == fingerprint_module(b)
    with torch.no_grad():
        b[2].weight[0, 0] += 1e-3
    assert fingerprint_module(a) != fingerprint_module(b)
    assert fingerprint_module(None) == "none"


def test_conditioning_fingerprint_sees_embeddings_and_options():
    emb = torch.randn(1, 77, 32)
    base = fingerprint_conditioning([(emb, {"pooled_output": None})])
    assert base == fingerprint_conditioning([(emb.clone(), {"pooled_output": None})])
    assert base != fingerprint_conditioning([(emb + 1, {"pooled_output": None})])
    assert base != fingerprint_conditioning([(emb, {"pooled_output": None, "strength": 0.5})])


def _job(uid):
    z = np.zeros((8, 8, 3), np.uint8)
    return refine.CropJob(0, 0, uid, z, np.eye(2, 3), z, np.zeros((8, 8), np.float32))


def test_crop_noise_depends_on_seed_and_face_not_on_batching():
    jobs = [_job(refine.crop_uid(f, k)) for f in range(3) for k in range(2)]
    whole = refine.crop_noise(jobs, 7, (4, 2, 2))
    split = torch.cat([refine.crop_noise(jobs[:4], 7, (4, 2, 2)), refine.crop_noise(jobs[4:], 7, (4, 2, 2))])
    assert whole.shape == (6, 4, 2, 2) and torch.equal(whole, split)
    assert not torch.equal(whole[0], whole[1])
    assert not torch.equal(whole, refine.crop_noise(jobs, 8, (4, 2, 2)))
