"""The shipped workflow on a real ComfyUI server, one prompt per clip x source, and what it delivered.

One server serves every run of a bench call (a start costs ~20 s on two cores); consecutive prompts
on one clip share ComfyUI's cache of the loader and Track Faces, as a studio's queue would. The
prompt is workflows/api/video_swap_builtin.json with its inputs pointed at the run's files and two
nodes added after the QA gate: Frames to IMAGE -> core Save Image, so the delivered frames (the gate's
output, reverted frames included) come back as PNGs. The shipped C2PA sink stays and still writes
its H.264 MP4, but that is lossy and would read as "changed" everywhere; the PNGs are exact up to
Save Image's float -> uint8 truncation (1/255).

What each run returns: the Track/Swap nodes' ui reports, the QA gate's JSON report, the tracked
faces (read back from the track stage's chunk store, for their five points), the delivered frames.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np

from ..paths import WORKFLOW

FRAMES_TO_IMAGE, SAVE_IMAGE = "901", "902"   # ids of the two nodes the bench adds


def _node(prompt: dict, cls: str) -> str:
    return next(nid for nid, n in prompt.items() if n["class_type"] == cls)


def build_prompt(video: str, count: int, source: str, reference: str | None, prefix: str,
                 qa_policy: str | None = None, swapper: str | None = None, qa_limit_set: str | None = None,
                 analyzer: str | None = None) -> dict:
    """The shipped workflow for one run; ``reference`` None: Track Faces follows the largest face
    (the clip gave the scorer no face to crop a reference from). ``qa_policy``: the QA gate's policy
    instead of the shipped one ("flag only" delivers every swapped face, for labelling);
    ``swapper``: another choice of Load Face Swapper's swapper than the shipped one; ``qa_limit_set``:
    the QA gate's limit set instead of the shipped default; ``analyzer``: another Load Face
    Analyzer pack than the shipped one."""
    p = json.loads(Path(WORKFLOW).read_text())
    loader, track = _node(p, "SwaplineLoadVideo"), _node(p, "SwaplineTrackFaces")
    p[loader]["inputs"].update(video=video, count=int(count))
    images = [n for n in p.values() if n["class_type"] == "LoadImage"]
    src_node = next(n for n in images if "Source" in n.get("_meta", {}).get("title", ""))
    ref_node = next(n for n in images if n is not src_node)
    src_node["inputs"]["image"] = source
    if reference is None:
        p[track]["inputs"]["mode"] = "largest"
        p[track]["inputs"].pop("reference", None)
        ref_node["inputs"]["image"] = source   # still loaded (its model node stays), never used
    else:
        ref_node["inputs"]["image"] = reference
    qa = _node(p, "SwaplineQAGate")
    p[qa]["inputs"]["filename_prefix"] = prefix
    if qa_policy is not None:
        p[qa]["inputs"]["policy"] = qa_policy
    if swapper is not None:
        p[_node(p, "SwaplineSwapperLoader")]["inputs"]["swapper"] = swapper
    if qa_limit_set is not None:
        p[qa]["inputs"]["limit_set"] = qa_limit_set
    if analyzer is not None:
        p[_node(p, "SwaplineAnalyzerLoader")]["inputs"]["pack"] = analyzer
    p[_node(p, "SwaplineC2PASink")]["inputs"]["filename_prefix"] = prefix
    p[FRAMES_TO_IMAGE] = {"class_type": "SwaplineFramesToImage",
                          "inputs": {"frames": [qa, 0], "max_frames": 100_000}}
    p[SAVE_IMAGE] = {"class_type": "SaveImage",
                     "inputs": {"images": [FRAMES_TO_IMAGE, 0], "filename_prefix": prefix + "_frame"}}
    return p


def _ui(outputs: dict, key: str) -> dict:
    return next((d[key][0] for d in outputs.values() if key in d), {})


def tracked_faces(store: Path, n_frames: int) -> list[list]:
    """Per frame the tracked faces (bbox, kps, track_id), read from the track stage's chunk store the
    way the stage reloads it (faces a later chunk added back to earlier frames included)."""
    from swapline_core.video.stages import _arrays_to_faces, _flat_faces

    per_frame: list[list] = []
    for chunk in sorted(store.glob("chunk_*.npz")):
        a = dict(np.load(chunk, allow_pickle=False))
        per_frame += _arrays_to_faces(a)
        for i, f in zip(a["bf_index"].tolist(), _flat_faces(a, "bf_")):
            per_frame[i].append(f)
    if len(per_frame) != n_frames:
        raise RuntimeError(f"track store {store} holds {len(per_frame)} frames, the run has {n_frames}")
    return per_frame


class Server:
    """One ComfyUI server for a bench call; ``run`` queues one clip x source."""

    def __init__(self, work: Path, log=print):
        self.work, self.log = Path(work), log
        self.server = None
        self._tracks: dict = {}

    def __enter__(self) -> Server:
        from devtools.comfy_harness import ComfyServer

        shutil.rmtree(self.work, ignore_errors=True)
        (self.work / "models").mkdir(parents=True)
        self.server = ComfyServer(self.work / "server", self.work / "models")
        t0 = time.perf_counter()
        self.server.start()
        self.log(f"generalization: ComfyUI up in {time.perf_counter() - t0:.0f} s (log {self.server.log_path})")
        return self

    def __exit__(self, *exc) -> None:
        if self.server is not None:
            self.server.stop()

    @property
    def input_dir(self) -> Path:
        return self.server.base_dir / "input"

    def stage_file(self, src: Path, name: str) -> str:
        dst = self.input_dir / name
        if not dst.exists():
            try:
                os.link(src, dst)        # a symlink would resolve outside the input folder
            except OSError:
                shutil.copy(src, dst)
        return name

    def stage_frames(self, frames: list[np.ndarray], name: str, fps: float = 15.0) -> str:
        """Frames as a lossless animated WebP (composited clips). Not an image folder: the shipped
        sink then fails on a server started with --base-directory (it opens the folder's relative
        path for audio from ComfyUI's own folder: IsADirectoryError)."""
        from PIL import Image

        name += ".webp"
        ims = [Image.fromarray(f) for f in frames]
        ims[0].save(self.input_dir / name, save_all=True, append_images=ims[1:], lossless=True, quality=100,
                    method=0, duration=int(round(1000 / fps)), loop=0)
        return name

    def stage_image(self, rgb: np.ndarray, name: str) -> str:
        from PIL import Image

        Image.fromarray(rgb).save(self.input_dir / name)
        return name

    def run(self, label: str, video: str, count: int, source: str, reference: str | None,
            qa_policy: str | None = None, swapper: str | None = None, qa_limit_set: str | None = None,
            analyzer: str | None = None) -> dict:
        from PIL import Image

        prefix = f"gx/{label}"
        prompt = build_prompt(video, count, source, reference, prefix, qa_policy, swapper, qa_limit_set, analyzer)
        t0 = time.perf_counter()
        hist = self.server.run(prompt, timeout=1800)
        wall = time.perf_counter() - t0
        outputs = hist.get("outputs", {})
        track, swap, qa = _ui(outputs, "swapline_track"), _ui(outputs, "swapline_swap"), _ui(outputs, "swapline_qa")
        # a prompt that reuses ComfyUI's cached Track Faces output sends no ui for it: the report of
        # the run that computed it stands (same clip, count and reference)
        tracked_now = bool(track)
        if tracked_now:
            self._tracks[(video, count, reference)] = track
        else:
            track = self._tracks[(video, count, reference)]
        out_dir = self.server.base_dir / "output"
        report = json.loads((out_dir / qa["report_file"]).read_text())
        items = outputs.get(SAVE_IMAGE, {}).get("images", [])
        frames = [np.asarray(Image.open(self.server.output_path(it)).convert("RGB")) for it in items]
        if len(frames) != count:
            raise RuntimeError(f"{label}: the workflow delivered {len(frames)} frames, expected {count}")
        faces = tracked_faces(out_dir / "swapline_cache" / track["key"], count)
        # this run's files (PNGs, MP4, QA report); the chunk stores stay for the next source
        shutil.rmtree(out_dir / "gx", ignore_errors=True)
        seconds = {"track": round(sum(track.get("seconds", {}).values()), 2) if tracked_now else 0.0,
                   "swap": round(sum(swap.get("seconds", {}).values()), 2),
                   "qa": round(sum((report.get("seconds") or {}).values()), 2), "qa_detail": report.get("seconds")}
        return {"track": track, "swap": swap, "qa": report, "faces": faces, "frames": frames,
                "wall_s": round(wall, 2), "stage_s": seconds, "cuts": list(track.get("cuts") or [])}
