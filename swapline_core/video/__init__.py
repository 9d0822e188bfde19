"""Video input/output for Swapline: one import point over the streaming reader and writer.

``video_read`` probes and decodes (containers via PyAV, animated images via Pillow, image
folders); ``video_write`` encodes H.264 MP4 and still images. Both keep memory constant.
"""
from .read import (
                         DEFAULT_FOLDER_FPS,
                         MissingMediaError,
                         VideoInfo,
                         VideoReadError,
                         clear_probe_cache,
                         frame_time,
                         iter_chunks,
                         iter_frames,
                         natural_key,
                         probe,
                         read_frames,
)
from .write import MP4_COPY_AUDIO, VideoWriter, write_image

__all__ = ["DEFAULT_FOLDER_FPS", "MP4_COPY_AUDIO", "MissingMediaError", "VideoInfo",
           "VideoReadError", "VideoWriter", "clear_probe_cache", "frame_time", "iter_chunks",
           "iter_frames", "natural_key", "probe", "read_frames", "write_image"]
