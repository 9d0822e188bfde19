"""The main job, end to end: the batch video face swap through a real ComfyUI server.

Starts ComfyUI 0.3.75 (from .comfy/ComfyUI) with Swapline in custom_nodes, queues the shipped
workflow workflows/api/video_swap_builtin.json (built-in models only: nothing downloaded) on the
shipped sample clip and face, follows it over the WebSocket and copies the results to out/demo/.

`--publish` also makes the README's picture from this run: docs/images/demo_strip.jpg and its
caption in README.md (the commit and date it was made from, and the QA gate's verdict).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))          # devtools, swapline_core

from devtools.comfy_harness import ComfyServer  # noqa: E402

SAMPLES = REPO / "assets" / "samples"
# The source photo: a colour photo of a woman, as the sample clip's face. The greyscale
# source_face.png (which the tests and the quality bench keep) has no skin colour of its own to
# bring; the colour man (source_face_colour.png) brings his stubble, which the built-in texture
# swap pastes onto her face: viewers rejected 12 of 12 such faces and the gate takes the shot back
# (docs/measurements/qa_agreement.md, round mixed-5: 11 of 12 accepted with this photo).
INPUTS = {"swapline_sample_clip.mp4": SAMPLES / "kling_avatar_clip.mp4",
          "swapline_source_face.png": SAMPLES / "source_face_woman.png",
          "swapline_target_reference.png": SAMPLES / "target_reference.png"}


def before_after(source: Path, result: Path, face: Path, n: int = 4) -> Path:
    """Top row: the source photo, then frames of the input clip; bottom row: the same frames of
    the result (under the photo, a blank tile)."""
    import numpy as np
    from PIL import Image

    from swapline_core.video.read import probe, read_frames
    from swapline_core.video.write import write_image

    count = probe(source).frame_count
    picks = [int(i) for i in np.linspace(0, count - 1, n)]
    top, bottom = read_frames(source, picks), read_frames(result, picks)
    h, w = top[0].shape[:2]
    photo = np.asarray(Image.open(face).convert("RGB").resize((h, h), Image.LANCZOS))
    blank = np.full_like(photo, 255)
    strip = np.concatenate([np.concatenate([photo, *top], 1),
                            np.concatenate([blank, *(b[:h, :w] for b in bottom)], 1)], 0)
    path = result.parent / "before_after.png"
    write_image(path, strip)
    return path


def publish(strip: Path, report: dict) -> list[Path]:
    """The README's picture and caption from this run (the caption says what it was made from)."""
    import numpy as np
    from PIL import Image

    from devtools.captions import made_from, set_caption
    from swapline_core.video.write import write_image

    origin = made_from()        # before the picture is written: it would make the tree read as changed
    image = REPO / "docs" / "images" / "demo_strip.jpg"
    write_image(image, np.asarray(Image.open(strip).convert("RGB")), quality=88)
    qa = next((v for k, v in report["nodes"].items() if k.endswith(":swapline_qa")), None)
    summary = (qa or {}).get("summary", {})
    verdict = (f"QA gate: {summary['ok']} of {summary['evaluated']} frames passed"
               if "evaluated" in summary else "QA gate: no report")
    kept = sum(seg["frames"] for seg in (qa or {}).get("segments") or [] if seg.get("decision") == "kept original")
    if kept:
        verdict += f"; {kept} frames delivered as the original: the gate took back a shot a viewer would reject"
    caption = (f"Top: the source photo and frames of the shipped sample clip; bottom: the demo's output "
               f"(`scripts/demo.sh --publish`, {origin}; {verdict}).")
    return [image, set_caption(REPO / "README.md", "docs/images/demo_strip.jpg", caption)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--publish", action="store_true",
                    help="also write docs/images/demo_strip.jpg and its README caption from this run")
    args = ap.parse_args()
    out = REPO / "out" / "demo"
    work = out / ".comfy-run"
    shutil.rmtree(out, ignore_errors=True)  # results of an earlier run would be mistaken for this one's
    (work / "models").mkdir(parents=True)
    server = ComfyServer(work / "base", work / "models")
    server.prepare_dirs()
    for name, src in INPUTS.items():
        shutil.copy(src, server.base_dir / "input" / name)
    prompt = json.loads((REPO / "workflows" / "api" / "video_swap_builtin.json").read_text())
    print(f"[demo] starting ComfyUI (log: {server.log_path})")
    server.start()
    try:
        t0 = time.time()
        last = [0.0]

        def show(msg):
            if msg["type"] == "progress" and time.time() - last[0] > 1:
                last[0] = time.time()
                d = msg["data"]
                print(f"[demo]   node {d.get('node')}: {d['value']}/{d['max']}", flush=True)

        ws = server.connect()
        pid = server.queue(prompt)
        server.follow(ws, pid, timeout=3600, on_message=show)
        ws.close()
        hist = server.history(pid)
        elapsed = time.time() - t0
    finally:
        server.stop()
    outputs = hist["outputs"]
    written = []
    report = {"workflow": "workflows/api/video_swap_builtin.json", "seconds": round(elapsed, 2), "nodes": {}}
    for node_id, data in outputs.items():
        for item in data.get("images", []):
            src = server.output_path(item)
            if src.suffix.lower() in (".mp4", ".png", ".jpg", ".json"):
                shutil.copy(src, out / src.name)
                written.append(out / src.name)
        for key, value in data.items():
            if key.startswith("swapline_"):
                report["nodes"][f"{node_id}:{key}"] = value[0]
        for qa in data.get("swapline_qa", []):
            src = server.base_dir / "output" / qa["report_file"]
            shutil.copy(src, out / src.name)
            written.append(out / src.name)
    videos = [p for p in written if p.suffix == ".mp4"]
    if videos:
        strip = before_after(INPUTS["swapline_sample_clip.mp4"], videos[0], INPUTS["swapline_source_face.png"])
        written.append(strip)
    (out / "swapline_report.json").write_text(json.dumps(report, indent=1))
    written.append(out / "swapline_report.json")
    if args.publish:
        if not videos:
            raise SystemExit("--publish: the run wrote no video")
        written += publish(strip, report)
    print(f"[demo] done in {elapsed:.1f} s; results in {out}:")
    for p in written:
        print(f"[demo]   {p.relative_to(REPO)}")
    for line in qa_lines(report):
        print(f"[demo] {line}")
    return 0


def qa_lines(report: dict) -> list[str]:
    """What the QA gate delivered, in words: a shot kept original is the gate doing its job (a face
    a viewer would reject is not shipped), so the demo says so instead of leaving a puzzle."""
    qa = next((v for k, v in report["nodes"].items() if k.endswith(":swapline_qa")), None)
    if not qa:
        return []
    s = qa.get("summary", {})
    out = [f"QA gate ({qa.get('limit_set') or 'limits'}): {s.get('ok', '?')} of {s.get('evaluated', '?')} "
           "frames passed"]
    for seg in qa.get("segments", []):
        why = f": {seg['reasons'][0]}" if seg.get("reasons") else ""
        out.append(f"  frames {seg['first']}-{seg['last']}: {seg['decision']}{why}")
    if any(seg.get("decision") == "kept original" for seg in qa.get("segments", [])):
        out.append("  kept original: the gate judged the swap one a viewer would reject and delivered the "
                   "target's frames (docs/qa.md#the-labelled-set)")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
