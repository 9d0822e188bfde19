"""Face models that ship inside pip packages, so the pack works before the user adds any model.

- ``facenet-pytorch==2.5.3``: MTCNN weights (``facenet_pytorch/data/{p,r,o}net.pt``, 2 MB).
- ``dlib-bin`` + ``face-recognition-models==0.3.0``: dlib's 68/5-point shape predictors and the
  128-d ResNet face descriptor.

``face_recognition_models`` is never imported: its ``__init__`` needs ``pkg_resources``, which
current setuptools no longer provides. ``importlib.util.find_spec`` locates the package folder
without executing it. Nothing here downloads anything; a missing package raises
:class:`BuiltinModelsMissing` naming the pip requirement that provides it.

Licences: the 68-point predictor was trained on iBUG 300-W, whose terms exclude commercial
use; the 5-point predictor and the face descriptor are CC0. MTCNN weights are MIT.
"""
from __future__ import annotations

import importlib
import importlib.util
import threading
from pathlib import Path

# What pip installs each piece; repeated verbatim in error messages so users can copy it.
REQ_FACENET = "facenet-pytorch==2.5.3"
REQ_DLIB = "dlib-bin"
REQ_DLIB_MODELS = "face-recognition-models==0.3.0"

DLIB_FILES = {
    "shape68": "shape_predictor_68_face_landmarks.dat",
    "shape5": "shape_predictor_5_face_landmarks.dat",
    "recognition": "dlib_face_recognition_resnet_model_v1.dat",
}
MTCNN_FILES = ("pnet.pt", "rnet.pt", "onet.pt")

# Loaded models keyed by weight path (plus settings for MTCNN): every analyzer instance and
# every node shares one copy, and loading dlib's 100 MB of weights happens once per process.
_cache: dict[tuple, object] = {}
_lock = threading.Lock()


class BuiltinModelsMissing(RuntimeError):
    """A package that carries the built-in weights is not installed (or is incomplete)."""


def _package_dir(module: str, requirement: str) -> Path:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        raise BuiltinModelsMissing(
            f"the built-in face models need the Python package '{module}', which is not "
            f"installed: pip install \"{requirement}\" (into ComfyUI's Python environment)")
    return Path(locations[0])


def dlib_models_dir() -> Path:
    """The ``models/`` folder of face_recognition_models, found without importing it."""
    folder = _package_dir("face_recognition_models", REQ_DLIB_MODELS) / "models"
    missing = [name for name in DLIB_FILES.values() if not (folder / name).is_file()]
    if missing:
        raise BuiltinModelsMissing(
            f"face_recognition_models at {folder.parent} lacks {', '.join(missing)}; "
            f"reinstall it: pip install --force-reinstall \"{REQ_DLIB_MODELS}\"")
    return folder


def dlib_model_path(kind: str) -> Path:
    """Path of one dlib weight file: ``shape68``, ``shape5`` or ``recognition``."""
    if kind not in DLIB_FILES:
        raise KeyError(f"unknown dlib model {kind!r}; known: {', '.join(DLIB_FILES)}")
    return dlib_models_dir() / DLIB_FILES[kind]


def mtcnn_weight_paths() -> list[Path]:
    folder = _package_dir("facenet_pytorch", REQ_FACENET) / "data"
    paths = [folder / name for name in MTCNN_FILES]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise BuiltinModelsMissing(
            f"facenet_pytorch at {folder.parent} lacks {', '.join(missing)}; "
            f"reinstall it: pip install --force-reinstall \"{REQ_FACENET}\"")
    return paths


def import_dlib():
    try:
        return importlib.import_module("dlib")
    except ImportError as exc:
        raise BuiltinModelsMissing(
            f"the built-in face models need dlib: pip install \"{REQ_DLIB}\" "
            f"(a prebuilt wheel; no compiler needed) ({exc})") from exc


def _cached(key: tuple, build):
    with _lock:
        model = _cache.get(key)
        if model is None:
            model = _cache[key] = build()
        return model


def shape_predictor(kind: str = "shape68"):
    path = dlib_model_path(kind)
    return _cached(("dlib_shape", str(path)), lambda: import_dlib().shape_predictor(str(path)))


def face_recognizer():
    path = dlib_model_path("recognition")
    return _cached(("dlib_recognition", str(path)),
                   lambda: import_dlib().face_recognition_model_v1(str(path)))


def face_recognizer_torch(device: str = "cpu"):
    """The same recognition network run by torch (``dlib_resnet``): ~10x faster than dlib's own
    single-threaded CPU build, descriptors equal to float rounding; on ``device``."""
    from . import dlib_resnet

    path = dlib_model_path("recognition")

    def build():
        try:
            weights = dlib_resnet.load_weights(path)
        except (ValueError, IndexError) as exc:
            raise BuiltinModelsMissing(
                f"cannot read dlib's recognition network from {path} ({exc}); reinstall it: "
                f"pip install --force-reinstall \"{REQ_DLIB_MODELS}\"") from exc
        return dlib_resnet.DlibResNet(weights).eval().to(device)

    return _cached(("dlib_recognition_torch", str(path), str(device)), build)


# facenet-pytorch's default pyramid step (each level 0.709x the previous one)
MTCNN_FACTOR = 0.709


def mtcnn(min_face_size: float = 20, thresholds: tuple[float, float, float] = (0.6, 0.7, 0.7),
          factor: float = MTCNN_FACTOR, device: str = "cpu"):
    """A shared facenet-pytorch MTCNN in inference mode.

    Its PNet/RNet/ONet constructors call ``torch.load`` on the packaged state dicts without
    arguments. torch >= 2.6 defaults that to ``weights_only=True`` (the files are plain tensor
    state dicts), so older torch is refused rather than unpickling with full trust.
    """
    paths = mtcnn_weight_paths()          # fail with our message before importing facenet
    key = ("mtcnn", str(paths[0].parent), float(min_face_size), tuple(float(t) for t in thresholds),
           float(factor), str(device))

    def build():
        import torch

        if not torch.__version__ >= "2.6":
            raise BuiltinModelsMissing(
                f"the built-in MTCNN needs torch >= 2.6 (safe weights-only loading by default); "
                f"this environment has torch {torch.__version__}")
        try:
            from facenet_pytorch import MTCNN
        except ImportError as exc:
            raise BuiltinModelsMissing(
                f"facenet_pytorch is installed but fails to import ({exc}); "
                f"pip install \"{REQ_FACENET}\" (2.6.0 would downgrade torch and numpy)") from exc
        model = MTCNN(keep_all=True, min_face_size=float(min_face_size),
                      thresholds=list(thresholds), factor=float(factor), device=device)
        model.requires_grad_(False)
        if str(device) == "cpu":
            _fast_max_pools(model)
        return model.train(False)

    return _cached(key, build)


def _fast_max_pools(model) -> None:
    """Give PNet/RNet/ONet's max pools channels-last input. Torch's CPU max pool on NCHW tensors
    is ~5x slower than on channels-last ones (ONet's first pool: 12 ms vs 2.4 ms for 39 boxes,
    a fifth of a QA window's detection); a max is exact in any layout, so boxes, points and
    scores are bit-identical (tests/unit/backends/test_detect_min_face.py)."""
    import torch

    class ChannelsLastMaxPool(torch.nn.Module):
        def __init__(self, pool: torch.nn.MaxPool2d):
            super().__init__()
            self.pool = pool

        def forward(self, x):
            # PNet's input is already channels-last (facenet permutes NHWC images): leave it so,
            # since the next convolution's result depends on the layout it is given.
            if x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous():
                return self.pool(x)
            return self.pool(x.contiguous(memory_format=torch.channels_last)).contiguous()

    for net in (model.pnet, model.rnet, model.onet):
        for name, child in list(net.named_children()):
            if isinstance(child, torch.nn.MaxPool2d):
                setattr(net, name, ChannelsLastMaxPool(child))


def model_files() -> list[tuple[str, str]]:
    """(role, path) of every built-in weight file, for provenance and cache keys."""
    out = [(f"mtcnn_{p.stem}", str(p)) for p in mtcnn_weight_paths()]
    out += [(f"dlib_{kind}", str(dlib_model_path(kind))) for kind in ("shape68", "recognition")]
    return out


def available() -> tuple[bool, str]:
    """(True, "") when every built-in model can be loaded, else (False, the reason)."""
    try:
        mtcnn_weight_paths()
        dlib_models_dir()
        if importlib.util.find_spec("dlib") is None:
            raise BuiltinModelsMissing(f"dlib is not installed: pip install \"{REQ_DLIB}\"")
    except BuiltinModelsMissing as exc:
        return False, str(exc)
    return True, ""
