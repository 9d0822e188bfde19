from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

import time  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402

from swapline_core.backends.restorers import FaceRestorer, load_restorer  # noqa: E402
from swapline_core.errors import BadModelError, MissingModelError  # noqa: E402
from swapline_core.faces.align import template  # noqa: E402
from swapline_core.faces.paste import apply_patches, union_mask  # noqa: E402
from swapline_core.types import Face, FaceSet, FrameFaces  # noqa: E402


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from devtools.synthetic_models import build_models

    return build_models(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def bad_models(tmp_path_factory):
    from devtools.synthetic_models import build_bad_models

    return build_bad_models(tmp_path_factory.mktemp("bad"))


@pytest.fixture(scope="module")
def gfpgan(models):
    t0 = time.perf_counter()
    restorer = load_restorer(str(models["restorer"]))
    print(f"\nGFPGANv1.4 (synthetic) load: {time.perf_counter() - t0:.2f} s")
    return restorer


def face_at(scale: float, dx: float, dy: float) -> Face:
    """A face whose keypoints sit exactly on the FFHQ template, scaled and shifted."""
    kps = template(512, "ffhq") * scale + np.array([dx, dy], np.float32)
    x1, y1 = kps.min(0) - 40 * scale
    x2, y2 = kps.max(0) + 40 * scale
    return Face(bbox=np.array([x1, y1, x2, y2], np.float32), kps=kps.astype(np.float32), score=0.99)


def photo(size: int = 512, seed: int = 0) -> np.ndarray:
    """A real-photo texture (insightface's t1.jpg) so resampling has something to get wrong."""
    from devtools.media import T1, insightface_image

    img = np.array(Image.open(insightface_image(T1)).convert("RGB"))
    y, x = 100 + 37 * seed, 200 + 53 * seed
    return np.ascontiguousarray(img[y:y + size, x:x + size])


# ------------------------------------------------------------------------------ the real loader


def test_synthetic_gfpgan_loads(gfpgan, models):
    assert gfpgan.arch == "GFPGAN"
    assert gfpgan.name == "GFPGAN:GFPGANv1.4.pth"
    assert gfpgan.model_files() == [("restorer", str(models["restorer"]))]
    assert gfpgan.dtype == torch.float32 and gfpgan.device == torch.device("cpu")


def test_restore_one_face_changes_only_inside_the_mask(gfpgan):
    image = photo()
    face = face_at(0.6, 100, 90)
    t0 = time.perf_counter()
    patches = gfpgan.restore([image], [[face]], weight=1.0, batch=4)
    print(f"\none 512 face through GFPGAN: {time.perf_counter() - t0:.2f} s")
    assert len(patches) == 1 and len(patches[0]) == 1
    patch = patches[0][0]
    assert patch.info["restorer"] == gfpgan.name
    out = apply_patches(image, patches[0])
    assert out.shape == image.shape and out.dtype == np.uint8
    mask = union_mask(image.shape[:2], patches[0])
    outside = mask == 0
    assert 0.2 < outside.mean() < 0.95
    assert np.array_equal(out[outside], image[outside]), "pixels outside the paste mask changed"
    inside = mask > 0.99
    assert inside.sum() > 10_000
    # random weights: the face comes back as something else entirely
    assert np.abs(out[inside].astype(int) - image[inside]).mean() > 5
    # the feathered ellipse sits inside the aligned crop, i.e. around the face keypoints
    ys, xs = np.nonzero(mask)
    assert xs.min() > 0 and ys.min() > 0 and xs.max() < 511 and ys.max() < 511


def test_weight_zero_is_a_no_op_without_running_the_network(gfpgan):
    image = photo()
    assert gfpgan.restore([image], [[face_at(0.6, 100, 90)]], weight=0.0) == [[]]


def test_missing_file_is_a_missing_model_error(tmp_path):
    with pytest.raises(MissingModelError) as err:
        load_restorer(str(tmp_path / "GFPGANv1.3.pth"))
    assert "GFPGANv1.3.pth" in str(err.value) and str(tmp_path) in str(err.value)


def test_truncated_file_names_the_file(bad_models):
    path = str(bad_models["truncated_restorer"])
    with pytest.raises(BadModelError) as err:
        load_restorer(path)
    msg = str(err.value)
    assert path in msg and "truncated or corrupt" in msg


def test_not_a_restorer_names_the_file_and_architecture(bad_models):
    path = str(bad_models["not_a_restorer"])
    with pytest.raises(BadModelError) as err:
        load_restorer(path)
    msg = str(err.value)
    assert path in msg and "not a face restorer" in msg and "detected architecture: none" in msg
    assert "GFPGAN" in msg  # tells the user what would work


def test_an_upscaler_is_refused_with_its_architecture(tmp_path):
    from spandrel.architectures.Compact import Compact

    path = tmp_path / "4x_tiny_compact.pth"
    torch.save(Compact(num_feat=8, num_conv=2, upscale=2).state_dict(), str(path))
    with pytest.raises(BadModelError) as err:
        load_restorer(str(path))
    msg = str(err.value)
    assert str(path) in msg and "'Compact'" in msg and "not a face restorer" in msg


# ------------------------------------------------------------------------------ batching and the stage,
# with a stand-in network (a GFPGAN-shaped colour inverter) so they cost milliseconds


class Inverter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(1))
        self.calls = []

    def forward(self, x, return_rgb=False, randomize_noise=True):
        assert not randomize_noise, "GFPGAN must run with its fixed noise (no flicker across frames)"
        assert x.shape[1:] == (3, 512, 512) and x.min() >= -1 and x.max() <= 1
        self.calls.append(len(x))
        return -x * self.scale, []


@pytest.fixture
def inverter(tmp_path):
    weights = tmp_path / "inverter.pth"
    weights.write_bytes(b"stand-in")
    return FaceRestorer(Inverter(), "GFPGAN", str(weights))


def test_faces_are_batched_across_images_in_order(inverter):
    images = [photo(seed=k) for k in range(3)]
    faces = [[face_at(0.5, 60, 60), face_at(0.3, 300, 320)], [], [face_at(0.6, 100, 90)]]
    one = inverter.restore(images, faces, batch=1)
    assert inverter.module.calls == [1, 1, 1]
    inverter.module.calls.clear()
    together = inverter.restore(images, faces, batch=2)
    assert inverter.module.calls == [2, 1]
    assert [len(p) for p in together] == [2, 0, 1]
    for a, b in zip(one, together):
        for pa, pb in zip(a, b):
            assert pa.region == pb.region and np.allclose(pa.pixels, pb.pixels, atol=1e-3)
    # the inverted crop lands back on its own face
    p = together[2][0]
    x0, y0, x1, y1 = p.region
    cy, cx = (y0 + y1) // 2, (x0 + x1) // 2
    local = p.pixels[cy - y0, cx - x0]
    assert np.allclose(local, 255 - images[2][cy, cx].astype(np.float32), atol=20)


def test_half_weight_blends(inverter):
    image = photo()
    full = inverter.restore([image], [[face_at(0.6, 100, 90)]], weight=1.0)[0][0]
    half = inverter.restore([image], [[face_at(0.6, 100, 90)]], weight=0.5)[0][0]
    assert abs(float(half.pixels.mean()) - 127.5) < abs(float(full.pixels.mean()) - 127.5)


def test_restore_frames_stage_resumes(inverter, tmp_path):
    from swapline_core.video import stages as pipeline
    from swapline_core.video.frames import FrameSequence

    folder = tmp_path / "clip"
    folder.mkdir()
    images = [photo(seed=k) for k in range(3)]
    for k, img in enumerate(images):
        Image.fromarray(img).save(folder / f"frame_{k:03d}.png")
    seq = FrameSequence.open(str(folder), chunk=2)
    per_frame = [[face_at(0.6, 100, 90)], [], [face_at(0.5, 120, 100)]]
    faces = FaceSet([FrameFaces(i, fs, 512, 512) for i, fs in enumerate(per_frame)])
    done = []
    hooks = pipeline.Hooks(progress=done.append)
    out, report = pipeline.restore_frames(seq, faces, inverter, str(tmp_path / "store"), hooks)
    assert report.chunks_total == 2 and report.chunks_resumed == 0 and sum(done) == 3
    assert report.extra["faces_restored"] == 2
    from swapline_core.provenance.hashing import sha256_file

    # (role, path, sha256 of the bytes loaded): provenance names the weights that ran
    assert out.layers[-1].name == "restore"
    assert out.layers[-1].models == (("restorer", inverter.path, sha256_file(inverter.path)),)
    frames = [f for _, chunk in out.iter_chunks() for f in chunk]
    direct = inverter.restore(images, per_frame)
    for img, got, ps in zip(images, frames, direct):
        assert np.array_equal(got, apply_patches(img, ps) if ps else img)
    calls = len(inverter.module.calls)
    out2, report2 = pipeline.restore_frames(seq, faces, inverter, str(tmp_path / "store"), pipeline.Hooks())
    assert report2.chunks_resumed == 2 and len(inverter.module.calls) == calls and out2.key == out.key
    with pytest.raises(ValueError, match="cover 2 frames"):
        pipeline.restore_frames(seq, FaceSet(faces.frames[:2]), inverter, str(tmp_path / "store"), pipeline.Hooks())


def test_restore_leaves_the_faces_the_swap_refused(inverter, tmp_path):
    """A face the swap refused (here: a yaw limit of 0.1 deg, so nearly every face) stays as it
    was through the restore stage too; the others are restored."""
    from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
    from swapline_core.backends.classical import ClassicalSwapper
    from swapline_core.faces import identity as face_model
    from swapline_core.guards import GuardOptions
    from swapline_core.swap.chunk import SwapOptions
    from swapline_core.video import stages as pipeline
    from swapline_core.video.frames import FrameSequence

    analyzer = BuiltinAnalyzer()
    source = face_model.build_from_images(
        analyzer, [np.array(Image.open(ROOT / "assets" / "samples" / "source_face.png").convert("RGB"))])
    seq = FrameSequence.open(str(ROOT / "assets" / "samples" / "kling_avatar_clip.mp4"), count=8, chunk=4)
    store = str(tmp_path / "store")
    faces, _ = pipeline.track_faces(seq, analyzer, store, pipeline.Hooks(), mode="largest")
    swapped, swap = pipeline.swap_frames(seq, faces, source, ClassicalSwapper(), analyzer, store, pipeline.Hooks(),
                                         SwapOptions(guards=GuardOptions(max_yaw=0.1)))
    refused = pipeline.swap_refusals(swapped)
    n_refused = sum(len(v) for v in refused.values())
    n_faces = sum(len(fr.faces) for fr in faces.frames)
    assert n_refused == sum(swap.extra["skipped"].values()) > 0
    out, report = pipeline.restore_frames(swapped, faces, inverter, store, pipeline.Hooks())
    assert report.extra["faces_left_as_refused"] == n_refused
    assert report.extra["faces_restored"] == n_faces - n_refused
    before = [f for _, ch in swapped.iter_chunks() for f in ch]
    after = [f for _, ch in out.iter_chunks() for f in ch]
    for i, (a, b) in enumerate(zip(before, after)):
        all_refused = len(refused.get(i, {})) == len(faces.frames[i].faces)
        assert np.array_equal(a, b) == all_refused, i      # the inverter changes every face it restores
