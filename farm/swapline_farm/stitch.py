"""Stitch chunk MP4s by stream copy (farm-exec's minimal version: no audio, no codec-parameter
check; the lead takes farm-data's on merge)."""
from __future__ import annotations

from pathlib import Path

import av


def stitch(chunk_files: list[Path], original_clip: Path, out: Path, **_) -> dict:
    frames = 0
    with av.open(str(chunk_files[0])) as first, av.open(str(out), "w") as dst:
        ostream = dst.add_stream_from_template(first.streams.video[0])
        offset = 0
        for path in chunk_files:
            with av.open(str(path)) as src:
                s = src.streams.video[0]
                end = offset
                for pkt in src.demux(s):
                    if pkt.dts is None:
                        continue
                    pkt.pts += offset
                    pkt.dts += offset
                    end = max(end, pkt.pts + (pkt.duration or 0))
                    pkt.stream = ostream
                    dst.mux(pkt)
                    frames += 1
                offset = end
    return {"frames": frames, "chunks": len(chunk_files), "audio": None}
