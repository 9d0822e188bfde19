"""Stand-ins for the face models nobody can download here, under the real names and signatures.

Users put InsightFace's ``buffalo_l`` pack, ``inswapper_128.onnx`` and ``GFPGANv1.4.pth`` into
ComfyUI's models folder; none of them can be fetched on the build machine. Tests build files
with the exact input/output signatures instead, so insightface's shape-based router and
spandrel's key-based detector treat them like the real ones and our loading code runs unchanged:

- ``insightface/models/buffalo_l/det_10g.onnx``: SCRFD signature (input ``input.1``
  [1,3,?,?]; 9 outputs: scores, box distances, keypoints for strides 8/16/32, 2 anchors);
- ``insightface/models/buffalo_l/w600k_r50.onnx``: ArcFace signature ([None,3,112,112] ->
  [None,512]); small random convnet;
- ``insightface/models/buffalo_l/1k3d68.onnx``: the 3-D 68-point landmark signature (``data``
  [None,3,192,192] raw 0..255 RGB, normalised inside the graph, so insightface's ``Landmark``
  picks input mean 0 / std 1 as for the real file; one [None,3309] output = 1103 x/y/z points
  in -1..1 crop units, the last 68 in iBUG order); a fixed mean face plus 0.01 x a tiny random
  net of the crop (see :data:`LANDMARK_LAYOUT`);
- ``insightface/inswapper_128.onnx``: INSwapper signature (``target`` [1,3,128,128] RGB/255,
  ``source`` [1,512] -> one [1,3,128,128] output in [0,1]; last initializer ``emap`` 512x512);
  random convnet that tints the target face depending on the source;
- ``facerestore_models/GFPGANv1.4.pth``: GFPGANv1Clean of the real size (~349 MB), random weights.

Only the detector is not random (the landmark model's output is mostly fixed, see below):
random weights would report random boxes, and pipeline tests need faces where faces are. It
repackages MTCNN's O-Net (trained weights shipped inside the ``facenet-pytorch`` wheel, MIT)
as one fully convolutional SCRFD-shaped graph: O-Net scores
every window of six sizes (48..544 px of the detector input, two per SCRFD stride, windows
every size/6 px) and each window's face probability, box and five landmarks become SCRFD's
anchor-relative outputs. At det_size 640 it finds the six faces of insightface's ``t1.jpg``
(scores 0.76-0.97) and the face filling ``Tom_Hanks_54745.png`` (0.99), and nothing on black,
flat or noise images. It is deterministic, but it is not buffalo_l: faces under ~40 px in the
detector input are missed (at det_size 320 ``t1.jpg`` gives one face), scores are calibrated
differently, and it is slower (~0.3-0.7 s per 640x640 frame on two busy CPU cores).
The landmark stand-in always draws one mean face (upright, frontal, symmetric) into the box it
is given, moved by at most ~1% of the crop by the image: its points land on the eyes, nose and
mouth of upright frontal faces, roughly, and never follow a turned or tilted head.

Files are built once into a cache (``tests/.cache/synthetic-models/v<BUILDER_VERSION>``, or
``$SWAPLINE_SYNTHETIC_CACHE``; ~9 s, 340 MB) and hard-linked (copied across file systems) into
each models folder. Do not write to the linked files in place, that writes through to the
cache: replace them. A cache whose files changed size or mtime is rebuilt. The builds are
byte-for-byte reproducible with the pinned torch/onnx.

``python -m devtools.synthetic_models MODELS_DIR [BAD_MODELS_DIR]`` populates folders by hand.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from .build_cache import build_cached, link_all
from .lib import nets

BUILDER_VERSION = 3  # bump whenever a builder changes: the cache is keyed by it alone
REPO = Path(__file__).resolve().parent.parent
DEFAULT_CACHE = REPO / "tests" / ".cache" / "synthetic-models" / f"v{BUILDER_VERSION}"
OPSET = 17  # onnxruntime 1.20+ runs it; the real buffalo_l/inswapper files are opset 11-13

MODEL_FILES = {
    "detector": "insightface/models/buffalo_l/det_10g.onnx",
    "recognizer": "insightface/models/buffalo_l/w600k_r50.onnx",
    "landmark": "insightface/models/buffalo_l/1k3d68.onnx",
    "swapper": "insightface/inswapper_128.onnx",
    "restorer": "facerestore_models/GFPGANv1.4.pth",
}
BAD_FILES = {
    "not_a_swapper": "not_a_swapper.onnx",
    "truncated_restorer": "GFPGANv1.4_truncated.pth",
    "not_a_restorer": "not_a_restorer.pth",
}


def export_onnx(model, args, path: Path, **kwargs) -> None:
    """Legacy TorchScript exporter (no onnxscript needed), without its deprecation chatter."""
    import warnings

    import torch

    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, str(path), opset_version=OPSET, dynamo=False, **kwargs)


def _rename_values(path: Path, renames: dict[str, str], widths: list[int] | None = None) -> None:
    """Give graph values the real files' numeric names, which torch.onnx.export refuses, and
    optionally declare the outputs' fixed last dimension (the exporter leaves it symbolic)."""
    import onnx

    proto = onnx.load(str(path))
    g = proto.graph
    for out, width in zip(g.output, widths or []):
        out.type.tensor_type.shape.dim[-1].dim_value = width
    for node in g.node:
        for seq in (node.input, node.output):
            for i, name in enumerate(seq):
                seq[i] = renames.get(name, name)
    for v in (*g.input, *g.output, *g.value_info):
        v.name = renames.get(v.name, v.name)
    onnx.checker.check_model(proto)
    onnx.save(proto, str(path))


# --------------------------------------------------------------------------- detector (SCRFD)

# The detector's windows and score mapping: devtools/lib/nets.py (detector_module).
SCRFD_OUTPUTS = ["448", "471", "494", "451", "474", "497", "454", "477", "500"]  # real names


def _build_detector(path: Path) -> None:
    import torch

    model = nets.detector_module()
    dummy = torch.zeros(1, 3, 640, 640)
    # The real det_10g.onnx names its input "input.1" and both spatial axes "?".
    names = [f"out{i}" for i in range(9)]
    axes = {"input.1": {2: "?", 3: "?"}}
    axes.update({name: {0: f"anchors{i % 3}"} for i, name in enumerate(names)})
    export_onnx(model, (dummy,), path, input_names=["input.1"], output_names=names, dynamic_axes=axes)
    _rename_values(path, dict(zip(names, SCRFD_OUTPUTS)), [1] * 3 + [4] * 3 + [10] * 3)


# --------------------------------------------------------------------------- recognizer (ArcFace)

def _build_recognizer(path: Path) -> None:
    import torch

    model = nets.recognizer_module()
    export_onnx(model, (torch.zeros(2, 3, 112, 112),), path, input_names=["input.1"],
            output_names=["embedding"], dynamic_axes={"input.1": {0: "None"}, "embedding": {0: "None"}})
    _rename_values(path, {"embedding": "683"})  # the real file's output name


# --------------------------------------------------------------------------- landmarks (1k3d68)

# A mean face in the normalised crop units insightface's Landmark.get reads: a point p of the
# image is ((p - c) / (0.75 * s)) with c the box centre and s its longer side (the crop is
# 192 px over 1.5 s, and its -1..1 range maps to 0..192). Derived by
# :func:`derive_landmark_layout`, not copied from anywhere: dlib's 68-point predictor (the
# built-in analyzer) on the eight faces of assets/samples/target_reference.png and insightface's
# t1.jpg and Tom_Hanks_54745.png, each taken relative to its MTCNN box, turned upright (eyes
# level), averaged with its mirror image, then averaged over the faces. iBUG 68 order.
LANDMARK_LAYOUT = (
    # 0-16: jaw, image-left to image-right
    (-0.502, -0.125), (-0.502, +0.005), (-0.492, +0.138), (-0.463, +0.268), (-0.408, +0.389), (-0.327, +0.501),
    (-0.233, +0.600), (-0.128, +0.686), (+0.000, +0.710), (+0.128, +0.686), (+0.233, +0.600), (+0.327, +0.501),
    (+0.408, +0.389), (+0.463, +0.268), (+0.492, +0.138), (+0.502, +0.005), (+0.502, -0.125),
    # 17-26: brows
    (-0.384, -0.228), (-0.321, -0.273), (-0.239, -0.284), (-0.155, -0.268), (-0.077, -0.233), (+0.077, -0.233),
    (+0.155, -0.268), (+0.239, -0.284), (+0.321, -0.273), (+0.384, -0.228),
    # 27-35: nose bridge, then nostrils
    (+0.000, -0.127), (+0.000, -0.040), (+0.000, +0.051), (+0.000, +0.137), (-0.096, +0.195), (-0.050, +0.217),
    (+0.000, +0.234), (+0.050, +0.217), (+0.096, +0.195),
    # 36-47: eyes, image-left first
    (-0.288, -0.113), (-0.236, -0.132), (-0.178, -0.134), (-0.126, -0.106), (-0.181, -0.092), (-0.240, -0.094),
    (+0.126, -0.106), (+0.178, -0.134), (+0.236, -0.132), (+0.288, -0.113), (+0.240, -0.094), (+0.181, -0.092),
    # 48-67: mouth, outer then inner lip
    (-0.190, +0.347), (-0.119, +0.318), (-0.050, +0.306), (+0.000, +0.322), (+0.050, +0.306), (+0.119, +0.318),
    (+0.190, +0.347), (+0.122, +0.422), (+0.055, +0.458), (+0.000, +0.463), (-0.055, +0.458), (-0.122, +0.422),
    (-0.158, +0.352), (-0.050, +0.350), (+0.000, +0.355), (+0.050, +0.350), (+0.158, +0.352), (+0.051, +0.384),
    (+0.000, +0.391), (-0.051, +0.384),
)
# iBUG index of each point's mirror image (left eye outer corner 36 <-> right eye outer corner 45)
IBUG_MIRROR = (tuple(range(16, -1, -1)) + tuple(range(26, 16, -1)) + (27, 28, 29, 30, 35, 34, 33, 32, 31)
               + (45, 44, 43, 42, 47, 46, 39, 38, 37, 36, 41, 40)
               + (54, 53, 52, 51, 50, 49, 48, 59, 58, 57, 56, 55, 64, 63, 62, 61, 60, 67, 66, 65))
LANDMARK_POINTS = 1103   # 3309 / 3: insightface keeps the last 68


def derive_landmark_layout():
    """Recompute :data:`LANDMARK_LAYOUT` (68, 2) from the built-in analyzer (needs dlib)."""
    import numpy as np

    sys.path.insert(0, str(REPO))
    from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer

    from .media import HANKS, SAMPLES, T1, insightface_image, rgb

    analyzer, shapes = BuiltinAnalyzer(), []
    for path in (SAMPLES / "target_reference.png", insightface_image(HANKS), insightface_image(T1)):
        img = rgb(path)
        faces = analyzer.detect([img])
        analyzer.landmarks68([img], faces)
        for f in faces[0]:
            box = f.bbox.astype(np.float64)
            pts = (f.landmarks - (box[:2] + box[2:]) / 2) / (0.75 * max(box[2:] - box[:2]))
            dx, dy = pts[42:48].mean(0) - pts[36:42].mean(0)
            a = -np.arctan2(dy, dx)
            pts = pts @ np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]).T
            shapes.append((pts + pts[list(IBUG_MIRROR)] * [-1, 1]) / 2)
    return np.mean(shapes, axis=0)


def _build_landmark(path: Path) -> None:
    import onnx
    import torch

    axes = {"data": {0: "None"}, "fc1": {0: "None"}}
    model = nets.landmark_module(LANDMARK_LAYOUT, LANDMARK_POINTS)
    export_onnx(model, (torch.zeros(1, 3, 192, 192),), path, input_names=["data"],
            output_names=["fc1"], dynamic_axes=axes)
    _rename_values(path, {}, [LANDMARK_POINTS * 3])
    # insightface's Landmark decides the input normalisation from the first node *names*: a
    # "Sub*" and a "Mul*" among them mean mean 0 / std 1, what the real file gets.
    # torch names them "/Sub", "/Mul"; drop the scope slashes.
    proto = onnx.load(str(path))
    for node in proto.graph.node:
        node.name = node.name.lstrip("/").replace("/", "_")
    onnx.checker.check_model(proto)
    onnx.save(proto, str(path))


# --------------------------------------------------------------------------- swapper (INSwapper)

def export_swapper(path: Path, size: int) -> None:
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model, dummy = nets.swapper_module(size)
    export_onnx(model, dummy, path, input_names=["target", "source"], output_names=["output"])
    # insightface reads graph.initializer[-1] as the 512x512 embedding map and applies it in
    # numpy; no node uses it, so ORT logs "Removing initializer 'emap'" when loading (harmless).
    proto = onnx.load(str(path))
    rng = np.random.default_rng(3)
    emap = (rng.standard_normal((512, 512)) / np.sqrt(512)).astype(np.float32)
    proto.graph.initializer.append(numpy_helper.from_array(emap, "emap"))
    onnx.checker.check_model(proto)
    onnx.save(proto, str(path))


def _build_swapper(path: Path) -> None:
    export_swapper(path, 128)


# --------------------------------------------------------------------------- restorer (GFPGAN)

def _build_restorer(path: Path) -> None:
    import torch
    from spandrel.architectures.GFPGAN import GFPGAN

    torch.manual_seed(4)
    # GFPGAN v1.4's hyperparameters (spandrel's loader uses the same ones).
    model = GFPGAN(out_size=512, num_style_feat=512, channel_multiplier=2, decoder_load_path=None,
                   fix_decoder=False, num_mlp=8, input_is_latent=True, different_w=True, narrow=1,
                   sft_half=True)
    torch.save({"params_ema": model.state_dict()}, str(path))


_BUILDERS = {"detector": _build_detector, "recognizer": _build_recognizer, "landmark": _build_landmark,
             "swapper": _build_swapper, "restorer": _build_restorer}


# --------------------------------------------------------------------------- cache and linking

def ensure_cache(cache_dir: Path | None = None) -> Path:
    """Build the five models into the cache unless a complete, unmodified build is there."""
    return build_cached(Path(cache_dir or os.environ.get("SWAPLINE_SYNTHETIC_CACHE") or DEFAULT_CACHE),
                        MODEL_FILES, _BUILDERS)


def build_models(models_dir: Path, cache_dir: Path | None = None) -> dict[str, Path]:
    """Place the five stand-ins under ``models_dir`` (ComfyUI models layout).

    Returns {"detector", "recognizer", "landmark", "swapper", "restorer"} -> path (see MODEL_FILES).
    """
    return link_all(ensure_cache(cache_dir), MODEL_FILES, models_dir)


def build_bad_models(bad_dir: Path, cache_dir: Path | None = None) -> dict[str, Path]:
    """Files that must be rejected with a clear error (real copies, never links).

    - ``not_a_swapper.onnx``: INSwapper-like but 64x64, so insightface routes it to nothing;
    - ``GFPGANv1.4_truncated.pth``: the first 1 MiB of the synthetic GFPGAN (a broken download);
    - ``not_a_restorer.pth``: a valid state dict of an unrelated tiny module.
    """
    import torch

    bad_dir = Path(bad_dir)
    bad_dir.mkdir(parents=True, exist_ok=True)
    out = {role: bad_dir / name for role, name in BAD_FILES.items()}
    export_swapper(out["not_a_swapper"], 64)
    with open(ensure_cache(cache_dir) / MODEL_FILES["restorer"], "rb") as f:
        out["truncated_restorer"].write_bytes(f.read(1 << 20))
    torch.save(nets.tiny_convnet().state_dict(), str(out["not_a_restorer"]))
    return out


def main(argv: list[str]) -> int:
    if argv == ["--landmark-layout"]:  # print a fresh LANDMARK_LAYOUT to compare or paste
        for i, (x, y) in enumerate(derive_landmark_layout()):
            print(f"{i:2d} ({x:+.3f}, {y:+.3f})")
        return 0
    if len(argv) not in (1, 2) or argv[0].startswith("-"):
        print("usage: synthetic_models.py MODELS_DIR [BAD_MODELS_DIR] | --landmark-layout", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    from .synthetic_masks import build_mask_models  # lazy: that module imports this one

    for role, path in {**build_models(Path(argv[0])), **build_mask_models(Path(argv[0]))}.items():
        print(f"{role:10s} {path} ({path.stat().st_size / 1e6:.1f} MB)")
    if len(argv) == 2:
        for role, path in build_bad_models(Path(argv[1])).items():
            print(f"{role:18s} {path}")
    print(f"done in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
