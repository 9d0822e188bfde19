"""Video nodes: load a clip as SWAPLINE_FRAMES, track, swap and save it chunk by chunk."""
from __future__ import annotations

import hashlib
import json
import os

import folder_paths
from comfy_api.latest import io, ui
from typing_extensions import override

from ..swapline_core.errors import SwaplineError
from ..swapline_core.masks import MaskOptions as CoreMaskOptions
from ..swapline_core.parallel import read_ahead
from ..swapline_core.swap.chunk import SwapOptions
from ..swapline_core.video import read as video_read
from ..swapline_core.video import stages as pipeline
from ..swapline_core.video.frames import FrameSequence
from . import image_provenance, model_paths
from .absent import ABSENT, sentence
from .convert import check_interrupt, preview_ui, progress, to_image
from .swap import guard_inputs, guard_options
from .types import CATEGORY, Analyzer, FaceModel, Faces, Frames, MaskOptions, Swapper

VIDEO_EXTS = {".mp4", ".mov", ".webm", ".mkv", ".avi", ".m4v", ".gif", ".webp", ".apng"}
TRACK_MODES = ("identity", "largest", "all")


def input_videos() -> list[str]:
    root = folder_paths.get_input_directory()
    if not os.path.isdir(root):
        return []
    out = []
    for name in sorted(os.listdir(root)):
        p = os.path.join(root, name)
        if os.path.isdir(p) and not name.startswith(".") or os.path.splitext(name)[1].lower() in VIDEO_EXTS:
            out.append(name)
    return out


def resolve_input(name: str) -> str:
    root = os.path.realpath(folder_paths.get_input_directory())
    path = os.path.realpath(os.path.join(root, name))
    if os.path.commonpath([root, path]) != root:
        raise ValueError(f"'{name}' is outside ComfyUI's input folder")
    if not os.path.exists(path):
        from .validation import describe_choices

        raise FileNotFoundError(f"video '{name}' was not found in ComfyUI's input folder: upload it there "
                                f"(or an image folder for a sequence); available: {describe_choices(input_videos())}")
    return path


def auto_chunk(width: int, height: int) -> int:
    """Frames per chunk from free RAM: a chunk lives in a few copies while a stage works on it."""
    import torch

    from .memory import available_memory

    free = available_memory(torch.device("cpu"))
    per_frame = width * height * 3 * 8  # uint8 frames, float copies while blending, layers
    return int(max(4, min(64, (free * 0.05) // max(per_frame, 1))))


def frame_range_inputs(start_tooltip: str) -> list:
    """start / count / stride / chunk: how Load Video and VIDEO to Frames cut a clip into chunks."""
    return [
        io.Int.Input("start", default=0, min=0, max=10_000_000, tooltip=start_tooltip),
        io.Int.Input("count", default=0, min=0, max=10_000_000, tooltip="Number of frames to use (0 = to the end)."),
        io.Int.Input("stride", default=1, min=1, max=100, tooltip="Use every n-th frame (the fps is divided accordingly)."),
        io.Int.Input("chunk", default=16, min=0, max=256,
                     tooltip="Frames decoded and processed together (0 = choose from free memory). Resume works per chunk."),
    ]


class LoadVideo(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineLoadVideo",
            display_name="Load Video Frames (Swapline)",
            category=f"{CATEGORY}/video",
            description="Opens a clip (mp4, mov, webm, mkv, gif, animated webp, or a folder of images) from "
                        "ComfyUI's input folder as a lazy frame sequence: frames are decoded chunk by chunk "
                        "when a stage needs them, so memory does not grow with the clip length.",
            inputs=[
                io.Combo.Input("video", options=input_videos(), upload=io.UploadType.video,
                               tooltip="A video/animated image file or an image folder inside ComfyUI's input folder."),
                *frame_range_inputs("First frame to use (0-based)."),
            ],
            outputs=[Frames.Output(display_name="frames"), io.String.Output(display_name="info")],
        )

    @classmethod
    @override
    def fingerprint_inputs(cls, video, **_):
        path = resolve_input(video)
        st = os.stat(path)
        return f"{path}:{st.st_size}:{st.st_mtime_ns}"

    @classmethod
    @override
    def validate_inputs(cls, video=ABSENT):  # no **kwargs: it would switch off core's range checks
        if video is ABSENT:
            return sentence(cls, "video", "choose a video file (or an image folder) in ComfyUI's input folder")
        if video is None:       # linked: its value exists only when the node runs
            return True
        try:
            resolve_input(video)
        except (ValueError, FileNotFoundError) as exc:
            return str(exc)
        return True

    @classmethod
    @override
    def execute(cls, video, start, count, stride, chunk) -> io.NodeOutput:
        path = resolve_input(video)
        info = video_read.probe(path)
        chunk = chunk or auto_chunk(info.width, info.height)
        seq = FrameSequence.open(path, start, count, stride, chunk)
        facts = {"file": video, "frames": seq.count, "fps": round(seq.fps, 4), "width": seq.width,
                 "height": seq.height, "audio": info.audio_codec, "variable_fps": info.variable_fps,
                 "chunk": seq.chunk}
        if info.variable_fps:
            shift = video_read.constant_rate_shift(path, seq.start, seq.count, seq.stride, seq.fps)
            facts["timing_note"] = (f"variable frame rate: saved videos are constant {seq.fps:.4f} fps, moving frame "
                                    f"times by up to {shift * 1000:.1f} ms")
        if seq.width % 2 or seq.height % 2:
            facts["size_note"] = (f"{seq.width}x{seq.height} has an odd side: saved H.264 videos repeat the edge "
                                  "column/row to reach an even size")
        text = json.dumps(facts)
        return io.NodeOutput(seq, text, ui={"text": [text]})


def _hooks(total: int) -> pipeline.Hooks:
    pbar = progress(total)
    return pipeline.Hooks(progress=pbar.update, check_interrupt=check_interrupt)


class TrackFaces(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineTrackFaces",
            display_name="Track Faces (Swapline)",
            category=f"{CATEGORY}/video",
            description="Finds the selected person in every frame without running the detector on every frame: "
                        "detection + identity every N frames (batched per chunk), optical-flow tracking between, "
                        "One-Euro keypoint smoothing, and missed detections inside a live track keep the track. "
                        "Shot cuts are detected and reset every track (listed in the report and passed on to "
                        "later stages); a face that appears between detector frames is added back to the frames "
                        "since the last detection; a track ends as soon as its face leaves the frame or the "
                        "tracked spot no longer looks like it. "
                        "Results are cached per chunk on disk, so an interrupted run resumes.",
            inputs=[
                Frames.Input("frames", tooltip="From Load Video Frames."),
                Analyzer.Input("analyzer", tooltip="From Load Face Analyzer."),
                io.Combo.Input("mode", options=list(TRACK_MODES), default="identity",
                               tooltip="identity: follow the person of the reference face model; largest; all faces."),
                FaceModel.Input("reference", optional=True, tooltip="Face model of the person to follow (identity mode)."),
                io.Float.Input("threshold", default=0.35, min=-1.0, max=1.0, step=0.01,
                               tooltip="Minimum cosine similarity to the reference for a detection to count as that person."),
                io.Int.Input("max_faces", default=1, min=0, max=32, tooltip="Faces to track per frame (0 = all)."),
                io.Int.Input("detect_every", default=8, min=1, max=120,
                             tooltip="Run the detector every N frames (and whenever a track weakens); 1 = every frame."),
                io.Int.Input("max_missing", default=12, min=0, max=300,
                             tooltip="Frames a track survives without a matching detection before it is dropped, while the face "
                                     "still looks present at the tracked spot (a face that left ends its track at once)."),
                io.Float.Input("smoothing", default=0.5, min=0.0, max=1.0, step=0.05,
                               tooltip="Keypoint smoothing strength over time (One-Euro filter); 0 = off."),
            ],
            outputs=[Faces.Output(display_name="faces"), io.String.Output(display_name="report")],
        )

    @classmethod
    @override
    def execute(cls, frames, analyzer, mode, threshold, max_faces, detect_every, max_missing, smoothing,
                reference=None) -> io.NodeOutput:
        if mode == "identity" and reference is None:
            raise SwaplineError("identity mode needs a reference face model (Build Face Model)")
        if reference is not None and mode == "identity" and reference.recognizer != analyzer.recognizer_name:
            raise SwaplineError(f"the face model was made with '{reference.recognizer}' but this analyzer embeds with "
                                f"'{analyzer.recognizer_name}': build the face model with the same analyzer")
        faces, report = pipeline.track_faces(
            frames, analyzer, model_paths.swapline_cache_dir(), _hooks(frames.count), mode=mode,
            reference=None if reference is None else reference.embedding, threshold=threshold,
            max_faces=max_faces, detect_every=detect_every, max_missing=max_missing, smoothing=smoothing)
        counts = faces.counts()
        summary = {"frames": len(counts), "frames_with_face": sum(1 for c in counts if c),
                   "no_face_frames": [i for i, c in enumerate(counts) if not c][:200], **report.to_json()}
        text = json.dumps(summary)
        return io.NodeOutput(faces, text, ui=preview_ui(cls, track=summary))


class SwapFrames(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineSwapFrames",
            display_name="Swap Faces in Frames (Swapline)",
            category=f"{CATEGORY}/video",
            description="Swaps the tracked faces of a frame sequence chunk by chunk (faces of a chunk go through "
                        "the swapper as one batch where the model allows). Only changed pixels are stored, per "
                        "chunk, on disk; re-queuing after an interrupt reuses finished chunks. Frames without a "
                        "face pass through unchanged: the frame count never changes.",
            inputs=[
                Frames.Input("frames", tooltip="From Load Video Frames."),
                Faces.Input("faces", tooltip="From Track Faces (same frames)."),
                FaceModel.Input("face_model", tooltip="The source identity."),
                Swapper.Input("swapper", tooltip="From Load Face Swapper."),
                io.Boolean.Input("color_match", default=True, tooltip="Match colour statistics to the target skin."),
                *guard_inputs(tracked=True),
                MaskOptions.Input("mask_options", optional=True,
                                  tooltip="From Face Mask Options. Not connected: the built-in occluder and, for the "
                                          "classical swapper, the kept mouth interior."),
            ],
            outputs=[Frames.Output(display_name="frames"), io.String.Output(display_name="report")],
        )

    @classmethod
    @override
    def execute(cls, frames, faces, face_model, swapper, color_match, guards=True, max_yaw=0.0,
                pose_tolerance_deg=0.0, mask_options=None) -> io.NodeOutput:
        opts = SwapOptions(color_match=color_match, masks=mask_options or CoreMaskOptions(),
                           guards=guard_options(guards, max_yaw, pose_tolerance_deg))
        out, report = pipeline.swap_frames(frames, faces, face_model, swapper, faces.analyzer,
                                           model_paths.swapline_cache_dir(), _hooks(frames.count), opts)
        text = json.dumps(report.to_json())
        return io.NodeOutput(out, text, ui=preview_ui(cls, swap=report.to_json()))


class SaveVideo(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineSaveVideo",
            display_name="Save Video (Swapline)",
            category=f"{CATEGORY}/video",
            description="Encodes a frame sequence to H.264 MP4 in ComfyUI's output folder, streaming chunk by "
                        "chunk, at the source frame rate with the source audio kept in sync. The output has "
                        "exactly as many frames as the input sequence.",
            inputs=[
                Frames.Input("frames", tooltip="The frame sequence to encode."),
                io.String.Input("filename_prefix", default="swapline/video", tooltip="Output name prefix (may contain a subfolder)."),
                io.Int.Input("crf", default=18, min=0, max=51, tooltip="x264 quality: lower is better and larger (18 is visually lossless)."),
                io.Combo.Input("preset", options=["ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower"],
                               default="medium", tooltip="x264 speed/size trade-off."),
                io.Boolean.Input("audio", default=True, tooltip="Keep the source audio (copied when MP4 can hold it, else re-encoded to AAC)."),
            ],
            outputs=[io.String.Output(display_name="path")],
            is_output_node=True,
        )

    @classmethod
    @override
    def execute(cls, frames, filename_prefix, crf, preset, audio) -> io.NodeOutput:
        path, subfolder, file, result = encode_sequence(frames, filename_prefix, crf, preset, audio)
        return io.NodeOutput(path, ui={"images": [ui.SavedResult(file, subfolder, io.FolderType.output)],
                                        "animated": (True,), "swapline_video": [result]})


def encode_sequence(frames: FrameSequence, filename_prefix: str, crf: int, preset: str, audio: bool,
                    index: int | None = None):
    """Stream a sequence into an MP4 in the output folder; returns (path, subfolder, file, summary).

    ``index``: the file number to use (the QA report's, so a job's report and video share it)
    unless a video with that number already exists.
    """
    out_dir, name, counter, subfolder, _ = folder_paths.get_save_image_path(
        filename_prefix, folder_paths.get_output_directory(), frames.width, frames.height)
    if index is not None and not os.path.exists(os.path.join(out_dir, f"{name}_{int(index):05}_.mp4")):
        counter = int(index)
    file = f"{name}_{counter:05}_.mp4"
    path = os.path.join(out_dir, file)
    written, audio_mode, conv = write_sequence(path, frames, crf, preset, audio)
    result = {"file": os.path.join(subfolder, file), "frames": written, "audio": audio_mode, **conv}
    return path, subfolder, file, result


def write_sequence(path: str, frames: FrameSequence, crf: int, preset: str, audio: bool) -> tuple[int, str | None, dict]:
    """Stream a sequence into an H.264 MP4 at `path`, chunk by chunk; (frames written, audio mode,
    the size/timing conversions it made, stated)."""
    from ..swapline_core.video.write import VideoWriter

    hooks = _hooks(frames.count)
    with VideoWriter(path, fps=_fps_of(frames), crf=crf, preset=preset) as writer:
        if audio and frames.has_audio:
            writer.add_audio_from(frames.path, start_frame=frames.start)
        # the next chunk is decoded (and its layers applied) while this one is encoded
        for _, chunk in read_ahead(frames.iter_chunks(), enabled=frames.reads_ahead()):
            hooks.check_interrupt()
            for f in chunk:
                writer.write(f)
            hooks.progress(len(chunk))
    if writer.frames_written != frames.count:
        raise SwaplineError(f"wrote {writer.frames_written} frames but the sequence has {frames.count}")
    return writer.frames_written, writer.audio_mode, conversions(frames, writer)


def conversions(frames: FrameSequence, writer) -> dict:
    """What the MP4 changed about size and timing, stated (issue 18: never a silent change)."""
    out = {}
    if writer.padded != (0, 0):
        w, h = writer.width, writer.height
        out["padded"] = {"right": writer.padded[0], "bottom": writer.padded[1],
                         "note": f"{w}x{h} has an odd side; H.264 (yuv420p) needs even sizes, so the edge "
                                 f"column/row was repeated: the video is {w + writer.padded[0]}x{h + writer.padded[1]}"}
    fps = float(_fps_of(frames))
    shift = video_read.constant_rate_shift(frames.path, frames.start, frames.count, frames.stride, fps) \
        if not os.path.isdir(frames.path) else 0.0
    if shift > 0:
        out["timing"] = {"source": "variable frame rate", "written": f"constant {fps:.4f} fps",
                         "max_shift_ms": round(shift * 1000, 1),
                         "note": f"variable-frame-rate source written at a constant {fps:.4f} fps: frame times "
                                 f"move by up to {shift * 1000:.1f} ms"}
    return out


def _fps_of(frames: FrameSequence):
    """The exact source rate (e.g. 30000/1001) unless the sequence was given another one."""
    from fractions import Fraction

    exact = video_read.probe(frames.path).fps_fraction / frames.stride
    return exact if abs(float(exact) - frames.fps) < 1e-6 else Fraction(frames.fps).limit_denominator(1001)


class FramesToImage(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineFramesToImage",
            display_name="Frames to IMAGE (Swapline)",
            category=f"{CATEGORY}/video",
            description="Materialises a (short) frame sequence as a ComfyUI IMAGE batch for core and third-party "
                        "nodes (e.g. VHS Video Combine), with the audio of those frames as AUDIO (none when the "
                        "clip has no audio). Refuses sequences above max_frames, since an IMAGE batch lives in "
                        "RAM as float32.",
            inputs=[Frames.Input("frames", tooltip="The frame sequence."),
                    io.Int.Input("max_frames", default=512, min=1, max=100_000,
                                 tooltip="Safety limit: refuse longer sequences instead of exhausting memory.")],
            outputs=[io.Image.Output(display_name="images"), io.Audio.Output(display_name="audio")],
        )

    @classmethod
    @override
    def execute(cls, frames, max_frames) -> io.NodeOutput:
        from .video_io import sequence_audio

        if frames.count > max_frames:
            raise SwaplineError(f"the sequence has {frames.count} frames, above max_frames={max_frames}; "
                                "raise the limit or keep using SWAPLINE_FRAMES nodes (constant memory)")
        out = [f for _, chunk in frames.iter_chunks() for f in chunk]
        return io.NodeOutput(to_image(out), sequence_audio(frames))


class ImageToFrames(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineImageToFrames",
            display_name="IMAGE to Frames (Swapline)",
            category=f"{CATEGORY}/video",
            description="Turns an IMAGE batch from core or third-party nodes (e.g. VHS Load Video, with its AUDIO) "
                        "into a SWAPLINE_FRAMES sequence, stored once losslessly in the Swapline cache (PNGs, or an "
                        "FFV1/PCM file when audio is connected). With 'reference' connected (the frames the "
                        "images were made from), the result is that sequence plus a layer of the changed pixels: "
                        "frame rate, audio and provenance are kept.",
            inputs=[io.Image.Input("images", tooltip="The frames, in order."),
                    io.Float.Input("fps", default=24.0, min=0.01, max=1000.0, step=0.01,
                                   tooltip="Frame rate of the sequence (an IMAGE batch carries none). Ignored when "
                                           "'reference' is connected."),
                    io.Int.Input("chunk", default=16, min=1, max=256, tooltip="Frames processed together by later stages."),
                    Frames.Input("reference", optional=True,
                                 tooltip="The sequence these images were edited from (same frame count and size): "
                                         "keeps its frame rate, audio and source, storing only changed pixels."),
                    io.Audio.Input("audio", optional=True,
                                   tooltip="Audio that plays with the images from their first frame (e.g. VHS Load "
                                           "Video's audio); kept through to Save Video. Ignored when 'reference' "
                                           "is connected (its audio is kept).")],
            outputs=[Frames.Output(display_name="frames")],
        )

    @classmethod
    @override
    def execute(cls, images, fps, chunk, reference=None, audio=None) -> io.NodeOutput:
        from dataclasses import replace

        from ..swapline_core.video.store import stage_key
        from ..swapline_core.video.write import write_image
        from .convert import to_arrays

        arrays = to_arrays(images)
        if reference is not None:
            try:
                out = pipeline.overlay_images(reference, arrays, model_paths.swapline_cache_dir(),
                                              _hooks(reference.count), image_provenance.lookup(images) or ())
            except ValueError as exc:
                raise SwaplineError(str(exc)) from exc
            return io.NodeOutput(out)
        if audio is not None:
            from .video_io import frames_from_memory

            return io.NodeOutput(frames_from_memory(arrays, fps, audio, chunk))
        key = stage_key("image-frames", [hashlib.sha256(a.tobytes()).hexdigest() for a in arrays])
        folder = os.path.join(model_paths.swapline_cache_dir(), "image-frames", key)
        if not os.path.isfile(os.path.join(folder, "done")):
            os.makedirs(folder, exist_ok=True)
            for i, a in enumerate(arrays):
                write_image(os.path.join(folder, f"{i:06d}.png"), a)
            open(os.path.join(folder, "done"), "w").close()
        seq = FrameSequence.open(folder, chunk=chunk)
        return io.NodeOutput(replace(seq, fps=float(fps)))
