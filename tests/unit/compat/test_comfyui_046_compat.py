"""Compatibility with ComfyUI 0.34-0.46, checked against what we could read of the newer code
(issue 29 item 3; docs/compatibility.md). Runs on the installed ComfyUI (0.3.75, and 0.33 with
SWAPLINE_COMFYUI): each test checks the fallback still works here AND holds the 0.4x facts as data,
with the upstream commit they were read at, because no newer ComfyUI can be installed to run them."""
from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

from devtools.inprocess import import_pack
from devtools.test_media import make_video

ROOT = Path(__file__).resolve().parents[3]

# comfy_api/latest/_input/video_types.py, Comfy-Org/ComfyUI df63641786f497f181b847d5893c3788223f3180
# (0.38+ API: as_resized, has_pending_frame_edits): the abstract methods of VideoInput, and the
# keyword arguments save_to gained. A VideoInput subclass lacking one fails to instantiate there.
VIDEOINPUT_ABSTRACT_NEWEST = {"get_components", "save_to", "as_trimmed"}
SAVE_TO_NEW_KWARGS = {"bit_depth", "crf", "color_space", "preset"}

# comfy_api/latest/_io.py __all__, Comfy-Org/ComfyUI 04e2a914334246661a77665aa14068a0670e3321, and
# _ui.py __all__ at 255ec42686473646ba5ce91e8d7b1f5e728ba778: `io`/`ui` are `from ._io import *`
# facades (_io_public/_ui_public) there, so only these names reach a node pack. (Subset we need.)
IO_PUBLIC_NEWEST = {
    "FolderType", "UploadType", "Custom", "Input", "WidgetInput", "Output", "Boolean", "Int", "Float",
    "String", "Combo", "MultiCombo", "Image", "Mask", "Latent", "Conditioning", "ControlNet", "Vae",
    "Model", "Audio", "Video", "Hidden", "Schema", "ComfyNode", "NodeOutput",
}
UI_PUBLIC_NEWEST = {"SavedResult", "SavedImages", "PreviewImage", "PreviewMask", "PreviewAudio",
                    "PreviewVideo", "PreviewText"}

# comfyui-frontend-package 1.58.1 (PyPI): scripts/app.js and scripts/api.js are plain shims;
# scripts/ui.js logs "[ComfyUI Deprecated] ... will be removed", extensions/core/widgetInputs.js
# logs "internal module, not part of the public API".
FRONTEND_STABLE = {"scripts/app.js", "scripts/api.js"}


@pytest.fixture(scope="module")
def video_io(tmp_path_factory):
    import_pack()
    import folder_paths

    folder_paths.set_output_directory(str(tmp_path_factory.mktemp("output")))
    return importlib.import_module("swapline.nodes.video_io")


def _pack_python() -> list[Path]:
    return sorted((ROOT / "nodes").glob("*.py")) + [ROOT / "__init__.py"]


# ------------------------------------------------------------------ VideoInput subclasses


def test_pack_video_inputs_implement_the_newest_abstract_methods(video_io):
    """Any VideoInput subclass of ours must implement the installed base's abstract methods and
    the newest ones, and its save_to must take the new keyword arguments. Today the pack has none
    (it hands out core's VideoFromFile), so this guards a future one."""
    from comfy_api.latest import Input

    base = Input.Video
    installed = set(getattr(base, "__abstractmethods__", ()))
    assert installed <= VIDEOINPUT_ABSTRACT_NEWEST | {"get_components", "save_to"}
    ours = []
    for path in _pack_python():
        if path.name == "__init__.py":
            continue
        mod = importlib.import_module(f"swapline.nodes.{path.stem}")
        ours += [c for _, c in inspect.getmembers(mod, inspect.isclass)
                 if issubclass(c, base) and c.__module__ == mod.__name__]
    for cls in ours:
        missing = {m for m in installed | VIDEOINPUT_ABSTRACT_NEWEST
                   if getattr(getattr(cls, m, None), "__isabstractmethod__", True)}
        assert not missing, f"{cls.__name__} lacks {sorted(missing)}"
        params = inspect.signature(cls.save_to).parameters
        takes_all = any(p.kind is p.VAR_KEYWORD for p in params.values())
        assert takes_all or SAVE_TO_NEW_KWARGS <= set(params), f"{cls.__name__}.save_to"
    assert ours == []  # documented in docs/compatibility.md: update it when this changes


def test_pack_never_calls_save_to():
    """The new save_to arguments cannot break a caller we do not have."""
    for path in _pack_python():
        assert ".save_to(" not in path.read_text(), path


# ------------------------------------------------------------------ cropped VIDEO (0.35+)


def test_pending_frame_edits_feature_detection(video_io, tmp_path):
    from comfy_api.latest import InputImpl

    class Newest:
        def __init__(self, pending):
            self.pending = pending

        def has_pending_frame_edits(self):
            return self.pending

    assert video_io.pending_frame_edits(Newest(True)) is True
    assert video_io.pending_frame_edits(Newest(False)) is False
    assert video_io.pending_frame_edits(object()) is False
    clip = make_video(tmp_path / "plain.mp4", n=4)
    plain = InputImpl.VideoFromFile(str(clip))
    assert video_io.pending_frame_edits(plain) is False   # 0.3.75 / 0.33: no crop exists
    assert video_io.reads_own_file(plain) is True


def test_cropped_file_video_is_read_through_core_decode(video_io, tmp_path):
    """0.46's Video Crop returns a VideoFromFile whose stream source is the uncropped file and
    whose has_pending_frame_edits() is True; its get_components() applies crop and trim. Emulated
    on the installed VideoFromFile: VIDEO to Frames must show the crop, and trim exactly once."""
    from comfy_api.latest import InputImpl

    clip = make_video(tmp_path / "clip.mp4", n=20, w=160, h=120)

    class CroppedTrimmed(InputImpl.VideoFromFile):
        def has_pending_frame_edits(self):
            return True

        def get_active_trim_window(self):
            return 5 / 29.97, 0.0            # core's trim: from frame 5 to the end

        def get_components(self):
            # the whole clip (0.33's own decode would apply our trim window already), then
            # trim + crop as core's decode does
            comp = InputImpl.VideoFromFile(str(clip)).get_components()
            comp.images = comp.images[5:, 10:74, 20:116, :]
            return comp

    video = CroppedTrimmed(str(clip))
    assert video_io.reads_own_file(video) is False
    out = video_io.VideoToFrames.execute(video, start=0, count=0, stride=1, chunk=0)
    seq, text = out.args[0], out.args[1]
    assert (seq.width, seq.height) == (96, 64)
    assert seq.count == 15                    # trimmed once, not 5 + 5 frames off
    assert '"trim_first_frame": 0' in text
    assert seq.path != str(clip)


def test_plain_file_video_still_read_where_it_lies(video_io, tmp_path):
    from comfy_api.latest import InputImpl

    clip = make_video(tmp_path / "clip.mp4", n=12)
    out = video_io.VideoToFrames.execute(InputImpl.VideoFromFile(str(clip)), start=0, count=0, stride=1, chunk=0)
    assert out.args[0].path == str(clip) and out.args[0].count == 12


# ------------------------------------------------------------------ io / ui facades


def _used(prefix: str) -> set[str]:
    names = set()
    for path in _pack_python():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id == prefix and node.attr[:1].isupper()):
                names.add(node.attr)
    return names - {"BytesIO"}   # `io` in video_io.py is also the stdlib module (as _io)


def test_io_and_ui_names_we_use_are_public_here_and_in_the_newest_facades():
    import_pack()
    from comfy_api.latest import io, ui

    used_io, used_ui = _used("io"), _used("ui")
    assert used_io and used_ui
    assert used_io <= IO_PUBLIC_NEWEST, sorted(used_io - IO_PUBLIC_NEWEST)
    assert used_ui <= UI_PUBLIC_NEWEST, sorted(used_ui - UI_PUBLIC_NEWEST)
    assert all(hasattr(io, n) for n in used_io)
    assert all(hasattr(ui, n) for n in used_ui)


# ------------------------------------------------------------------ frontend modules


def test_frontend_imports_only_stable_modules():
    imports = set()
    for js in (ROOT / "web").rglob("*.js"):
        text = js.read_text()
        imports |= set(re.findall(r"""(?:from\s+|import\()\s*["']([^"']+)["']""", text))
    targets = {re.sub(r"^(\.\./)+", "", i) for i in imports}
    assert targets and targets <= FRONTEND_STABLE, sorted(targets - FRONTEND_STABLE)
