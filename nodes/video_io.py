"""Core VIDEO and IMAGE + AUDIO interop: clips from core Load Video / Create Video (or VHS) into
SWAPLINE_FRAMES without decoding them into one IMAGE tensor, and frame sequences out to core's
Save Video as a VIDEO (audio included).

A file-backed VIDEO (core Load Video) is opened where it lies: its frames are then decoded chunk
by chunk like Load Video Frames does. Only a VIDEO that is already in memory (Create Video's
components, an in-memory upload) is written once to the Swapline cache, losslessly.
"""
from __future__ import annotations

import hashlib
import io as _io
import json
import os
from fractions import Fraction

import folder_paths
import numpy as np
import torch
from comfy_api.latest import InputImpl, io
from typing_extensions import override

from ..swapline_core.errors import SwaplineError
from ..swapline_core.video import lossless
from ..swapline_core.video import read as video_read
from ..swapline_core.video.frames import FrameSequence
from ..swapline_core.video.store import stage_key
from . import model_paths
from .convert import to_arrays
from .types import CATEGORY, Frames
from .video import auto_chunk, frame_range_inputs, write_sequence


def _cache_file(kind: str, key: str, ext: str) -> str:
    folder = os.path.join(model_paths.swapline_cache_dir(), kind)
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, key + ext)


def _audio_arrays(audio) -> tuple[np.ndarray, int] | None:
    """ComfyUI AUDIO ({"waveform": (batch, channels, samples), "sample_rate"}) -> (channels, samples)."""
    if audio is None:
        return None
    wave, rate = audio.get("waveform"), audio.get("sample_rate")
    if wave is None or rate is None:
        raise SwaplineError("the AUDIO input has no waveform/sample_rate: connect a core or VHS audio output")
    wave = wave[0] if wave.ndim == 3 else wave
    # our lossless bridge and MP4 writer carry mono or stereo: wider layouts keep their first two
    return wave[:2].detach().float().cpu().numpy(), int(rate)


def frames_from_memory(arrays: list[np.ndarray], fps, audio, chunk: int) -> FrameSequence:
    """RGB frames (+ AUDIO) held in memory -> a sequence on a lossless FFV1/PCM file in the cache."""
    sound = _audio_arrays(audio)
    rate = Fraction(fps).limit_denominator(1001) if not isinstance(fps, Fraction) else fps
    parts = [hashlib.sha256(a.tobytes()).hexdigest() for a in arrays] + [str(rate)]
    if sound is not None:
        parts += [hashlib.sha256(sound[0].tobytes()).hexdigest(), str(sound[1])]
    path = _cache_file("memory-video", stage_key("memory-video", parts), ".nut")
    if not os.path.isfile(path):
        lossless.write_lossless(path, arrays, rate, sound)
    return FrameSequence.open(path, chunk=chunk or auto_chunk(arrays[0].shape[1], arrays[0].shape[0]))


def sequence_audio(frames: FrameSequence):
    """The AUDIO that plays with a sequence's frames, or None when its clip has none."""
    if not frames.has_audio:
        return None
    got = lossless.read_audio(frames.path, frames.start, frames.count / frames.fps)
    if got is None:
        return None
    samples, rate = got
    return {"waveform": torch.from_numpy(samples).unsqueeze(0), "sample_rate": rate}


def pending_frame_edits(video) -> bool:
    """Whether a core VIDEO holds frame edits (Video Crop, a resize) its stream source lacks.

    ComfyUI >= 0.35 lets a VideoFromFile carry a crop (and later a resize) that is applied only
    when frames are decoded by core; its get_stream_source() is still the unedited file, so reading
    that file would silently drop the edit. Newer cores say so through has_pending_frame_edits();
    the crop rectangle kept privately by VideoFromFile is the fallback for cores in between.
    0.3.75 and 0.33 have neither: nothing is pending there."""
    check = getattr(video, "has_pending_frame_edits", None)
    if callable(check):
        return bool(check())
    return getattr(video, "_VideoFromFile__crop", None) is not None


def reads_own_file(video) -> bool:
    """True when the clip is read from the VIDEO's own stream source (core's trim window still to
    apply), False when core's decode (get_components, trim and edits applied) is stored instead."""
    return isinstance(video, InputImpl.VideoFromFile) and not pending_frame_edits(video)


def video_file(video) -> str:
    """A path to the clip behind a core VIDEO: its own file when it has one (no decode here)."""
    # Only VideoFromFile has a source of its own: on 0.3.75 the base class's get_stream_source
    # re-encodes components into a BytesIO (and fails for lack of a format). One with pending
    # edits (a crop) goes the components way: its file does not show the edit.
    src = video.get_stream_source() if reads_own_file(video) else None
    if isinstance(src, str):
        return src
    if isinstance(src, _io.BytesIO):
        data = src.getvalue()
        fmt = video.get_container_format() if hasattr(video, "get_container_format") else ""
        ext = ".webm" if "webm" in fmt else ".gif" if "gif" in fmt else ".webp" if "webp" in fmt else ".mp4"
        path = _cache_file("memory-video", hashlib.sha256(data).hexdigest()[:32], ext)
        if not os.path.isfile(path):
            from ..swapline_core.video.write import temp_path

            # a temporary name of this call's own: two prompts storing the same upload at once
            # must not write into (or rename away) one shared partial file
            tmp = temp_path(path)
            try:
                with open(tmp, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
        return path
    # components (Create Video): the frames are in memory already; store them once, losslessly
    comp = video.get_components()
    arrays = to_arrays(comp.images)
    if not arrays:
        raise SwaplineError("the VIDEO has no frames")
    return frames_from_memory(arrays, Fraction(comp.frame_rate), comp.audio, 0).path


class VideoToFrames(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineVideoToFrames",
            display_name="VIDEO to Frames (Swapline)",
            category=f"{CATEGORY}/video",
            description="Takes core's VIDEO (Load Video, Create Video, Trim Video) as a lazy frame sequence with its "
                        "audio. A clip loaded from a file is read where it lies, chunk by chunk, never decoded into "
                        "one IMAGE tensor; an in-memory VIDEO is stored once losslessly in the Swapline cache.",
            inputs=[
                io.Video.Input("video", tooltip="From core Load Video (or any VIDEO output)."),
                *frame_range_inputs("First frame to use (0-based, after core's trim if any)."),
            ],
            outputs=[Frames.Output(display_name="frames"), io.String.Output(display_name="info")],
        )

    @classmethod
    @override
    def execute(cls, video, start, count, stride, chunk) -> io.NodeOutput:
        path = video_file(video)
        try:
            info = video_read.probe(path)
        except video_read.VideoReadError as exc:
            raise SwaplineError(f"cannot read the VIDEO's clip {path}: {exc}") from exc
        # core's decode (components) has applied the trim window already
        first, limit = _trim_frames(video, info) if reads_own_file(video) else (0, 0)
        if limit and start >= limit:
            raise SwaplineError(f"start frame {start} is past the end of the trimmed clip ({limit} frames)")
        if limit:
            available = len(range(start, limit, stride))
            count = available if count <= 0 else min(count, available)
        seq = FrameSequence.open(path, first + start, count, stride, chunk or auto_chunk(info.width, info.height))
        text = json.dumps({"file": os.path.basename(path), "frames": seq.count, "fps": round(seq.fps, 4),
                           "width": seq.width, "height": seq.height, "audio": info.audio_codec,
                           "trim_first_frame": first, "chunk": seq.chunk})
        return io.NodeOutput(seq, text, ui={"text": [text]})


def _trim_frames(video, info) -> tuple[int, int]:
    """(first frame, frame count or 0) of core's trim window (ComfyUI 0.33 Trim Video; none on 0.3.75)."""
    if not hasattr(video, "get_active_trim_window"):
        return 0, 0
    start_time, duration = video.get_active_trim_window()
    first = round(start_time * info.fps)
    limit = round(duration * info.fps) if duration > 0 else 0
    if first >= info.frame_count:
        raise SwaplineError(f"the VIDEO is trimmed to start at {start_time:.3f} s, past its end "
                            f"({info.frame_count} frames at {info.fps:.3f} fps)")
    return first, min(limit, info.frame_count - first) if limit else 0


class FramesToVideo(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineFramesToVideo",
            display_name="Frames to VIDEO (Swapline)",
            category=f"{CATEGORY}/video",
            description="Hands a frame sequence to core video nodes (Save Video, Get Video Components) as a VIDEO: "
                        "encoded chunk by chunk to an H.264 MP4 in ComfyUI's temp folder with the source audio in "
                        "sync, so memory stays one chunk. Core Save Video with format/codec 'auto' copies it as is.",
            inputs=[
                Frames.Input("frames", tooltip="The frame sequence."),
                io.Int.Input("crf", default=18, min=0, max=51,
                             tooltip="x264 quality: lower is better and larger (18 is visually lossless)."),
                io.Combo.Input("preset", options=["ultrafast", "superfast", "veryfast", "faster", "fast", "medium",
                                                  "slow", "slower"],
                               default="medium", tooltip="x264 speed/size trade-off."),
                io.Boolean.Input("audio", default=True, tooltip="Keep the source audio."),
            ],
            outputs=[io.Video.Output(display_name="video")],
        )

    @classmethod
    @override
    def execute(cls, frames, crf, preset, audio) -> io.NodeOutput:
        key = stage_key("frames-video", frames.key, crf, preset, bool(audio))
        folder = os.path.join(folder_paths.get_temp_directory(), "swapline-video")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, key + ".mp4")
        if not os.path.isfile(path):
            write_sequence(path, frames, crf, preset, audio)   # VideoWriter renames a finished file into place
        return io.NodeOutput(InputImpl.VideoFromFile(path))
