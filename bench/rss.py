"""Peak memory of a real ComfyUI server running the shipped built-in video workflow.

A fresh server (own base directory, so no cached node outputs or chunk stores) is started per
clip; a thread samples the RSS of the server process plus all its children every 0.1 s from
just before the prompt is queued until the WebSocket reports it finished. Per-node wall times
come from the WebSocket's "executing" events, per-stage times from the Track/Swap nodes' ui
outputs (``swapline_track`` / ``swapline_swap``, as in scripts/demo.py) and the QA Gate's report.
"""
from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path

from .paths import MODELS, SOURCE_FACE, TARGET_REFERENCE, WORKFLOW
from .section import Section, Target

INTERVAL_S = 0.1
MB = 1024 * 1024


class RssSampler(threading.Thread):
    """Samples the summed RSS of a process tree until stopped; keeps the peak and a timeline."""

    def __init__(self, pid: int, interval: float = INTERVAL_S):
        super().__init__(daemon=True)
        import psutil

        self.root = psutil.Process(pid)
        self.interval = interval
        self.peak = 0
        self.samples: list[tuple[float, int]] = []
        self._halt = threading.Event()
        self._t0 = time.perf_counter()

    def tree_rss(self) -> int:
        import psutil

        total = 0
        try:
            procs = [self.root] + self.root.children(recursive=True)
        except psutil.NoSuchProcess:
            return 0
        for p in procs:
            try:
                total += p.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        return total

    def run(self) -> None:
        while not self._halt.is_set():
            rss = self.tree_rss()
            self.peak = max(self.peak, rss)
            self.samples.append((time.perf_counter() - self._t0, rss))
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join(5)

    def timeline(self, points: int = 60) -> list[list[float]]:
        """Down-sampled (seconds, MB) pairs, keeping each bucket's maximum."""
        if not self.samples:
            return []
        step = max(1, len(self.samples) // points)
        out = []
        for i in range(0, len(self.samples), step):
            bucket = self.samples[i:i + step]
            t, rss = max(bucket, key=lambda s: s[1])
            out.append([round(t, 1), round(rss / MB, 1)])
        return out


def _stage_inputs(server, clip: Path) -> str:
    inp = server.base_dir / "input"
    name = "swapline_bench_clip.mp4"
    try:
        os.link(clip, inp / name)      # a symlink would resolve outside the input folder
    except OSError:
        shutil.copy(clip, inp / name)
    shutil.copy(SOURCE_FACE, inp / "swapline_source_face.png")
    shutil.copy(TARGET_REFERENCE, inp / "swapline_target_reference.png")
    return name


class NodeClock:
    """Per-class wall seconds from the WebSocket's "executing" events (one node runs at a time)."""

    def __init__(self, classes: dict[str, str]):
        self.classes = classes
        self.seconds: dict[str, float] = {}
        self._node, self._t = None, 0.0

    def __call__(self, msg: dict) -> None:
        if msg.get("type") != "executing":
            return
        now = time.perf_counter()
        if self._node is not None:
            cls = self.classes.get(self._node, self._node)
            self.seconds[cls] = self.seconds.get(cls, 0.0) + now - self._t
        self._node, self._t = msg["data"].get("node"), now


def _ui(outputs: dict, key: str) -> dict:
    return next((d[key][0] for d in outputs.values() if key in d), {})


QA_SAMPLE_EVERY = 8


def run_workflow(label: str, clip: Path, work: Path, *, workflow: Path = WORKFLOW, log=print,
                 timeout: float = 4 * 3600, server=None, qa_sample_every: int = QA_SAMPLE_EVERY,
                 prompt: dict | None = None, models: Path = MODELS, device: str = "cpu") -> dict:
    """``server``: a running ``ComfyServer`` to use instead of a fresh one (the CI smoke test
    shares the test session's; its peak then includes whatever that server already held, so
    it is no measurement). It is left running and its output folder is left alone. ``prompt``:
    an API prompt to run instead of ``workflow``'s; ``models``/``device``: a fresh server's models
    folder, and "gpu" to start it without ``--cpu``."""
    from devtools.comfy_harness import ComfyServer
    from swapline_core.video.read import probe

    own = server is None
    if own:
        base = work / f"server-{label}"
        shutil.rmtree(base, ignore_errors=True)
        server = ComfyServer(base, models, device=device)
        server.prepare_dirs()
    base = server.base_dir
    prompt = json.loads(json.dumps(prompt)) if prompt is not None else json.loads(Path(workflow).read_text())
    loader = next(nid for nid, n in prompt.items() if n["class_type"] == "SwaplineLoadVideo")
    prompt[loader]["inputs"]["video"] = _stage_inputs(server, clip)
    for node in prompt.values():
        if node["class_type"] == "SwaplineQAGate":
            # QA streams like every stage, so sampling does not change the memory profile; it
            # keeps the 3000-frame run within a session on a 2-core machine.
            node["inputs"]["sample_every"] = qa_sample_every
    classes = {nid: node["class_type"] for nid, node in prompt.items()}
    frames = probe(clip).frame_count

    if own:
        log(f"  [{label}] starting ComfyUI (log: {server.log_path})")
        server.start()
    try:
        sampler = RssSampler(server.proc.pid)
        idle_rss = sampler.tree_rss()
        clock = NodeClock(classes)
        last_log = [time.perf_counter()]

        def on_message(msg):
            clock(msg)
            now = time.perf_counter()
            if msg.get("type") == "progress" and now - last_log[0] > 60:
                last_log[0] = now
                d = msg["data"]
                log(f"  [{label}] {classes.get(d.get('node'), d.get('node'))}: {d['value']}/{d['max']} "
                    f"(peak RSS so far {sampler.peak / MB:.0f} MB)")

        ws = server.connect()
        sampler.start()
        t0 = time.perf_counter()
        try:
            pid = server.queue(prompt)
            server.follow(ws, pid, timeout=timeout, on_message=on_message)
        finally:
            wall = time.perf_counter() - t0
            sampler.stop()
            ws.close()
        hist = server.history(pid)
    finally:
        if own:
            server.stop()
    outputs = hist.get("outputs", {})
    track, swap, qa = _ui(outputs, "swapline_track"), _ui(outputs, "swapline_swap"), _ui(outputs, "swapline_qa")
    qa_report = {}
    if qa.get("report_file"):
        qa_path = base / "output" / qa["report_file"]
        if qa_path.is_file():
            qa_report = json.loads(qa_path.read_text())
    written = _ui(outputs, "swapline_video").get("frames")
    if written is None:
        written = (_ui(outputs, "swapline_signing").get("results") or [{}])[0].get("frames")
    if written != frames:
        raise RuntimeError(f"[{label}] the workflow wrote {written} frames, expected {frames}")
    result = {"clip": str(clip), "frames": frames, "wall_s": round(wall, 3),
              "peak_rss_mb": round(sampler.peak / MB, 1), "idle_rss_mb": round(idle_rss / MB, 1),
              "rss_samples": len(sampler.samples), "rss_timeline_mb": sampler.timeline(),
              "node_seconds": {k: round(v, 3) for k, v in clock.seconds.items()},
              "frames_with_face": track.get("frames_with_face"), "tracker": track.get("tracker"),
              "swap_inference": swap.get("inference"),     # ONNX swappers: providers really got, batch used
              "qa": {"decision": qa.get("decision"), "sample_every": qa_report.get("sample_every"),
                     "seconds": qa_report.get("seconds"), "summary": qa.get("summary"),
                     "reverted_frames": len(qa_report.get("reverted_frames") or []),
                     "segments": [{k: s.get(k) for k in ("track_id", "first", "last", "decision", "reasons")}
                                  for s in qa_report.get("segments") or []][:20]},
              "stages": stage_table(track, swap, qa_report.get("seconds") or {}, clock.seconds, wall, frames),
              "server_log": str(server.log_path)}
    # The stage cache this job left for resume: its Track and Swap chunk stores (by their keys, so a
    # shared server's other stores do not count)
    cache = sum(stage_store_bytes(base / "output", r.get("key")) for r in (track, swap))
    result["stage_cache_mb"] = round(cache / MB, 3)
    result["stage_cache_mb_per_frame"] = round(cache / MB / frames, 4) if frames else None
    if own:
        shutil.rmtree(base / "output", ignore_errors=True)   # the encoded clip and chunk stores
    return result


def stage_store_bytes(output: Path, key: str | None) -> int:
    """Bytes of one stage's chunk store (output/swapline_cache/<key>); 0 without a key or store."""
    root = output / "swapline_cache" / key if key else None
    if root is None or not root.is_dir():
        return 0
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file())


ENCODERS = ("SwaplineSaveVideo", "SwaplineC2PASink")
STAGE_NODES = ("SwaplineTrackFaces", "SwaplineSwapFrames", "SwaplineQAGate") + ENCODERS


def stage_table(track: dict, swap: dict, qa: dict, node_seconds: dict, wall: float, frames: int) -> dict:
    """Stage table of one workflow run: the Track/Swap nodes' StageReports, the QA report's
    seconds and per-node wall times. QA = the QA Gate node's wall time (it decodes the original
    and swapped clip and re-runs detector + embedder); encode = the Save Video / C2PA Sink node's
    wall time (decode + patch-layer replay + H.264 encode, + signing for the sink).
    Model inference = detect + embed + landmarks (+ QA's); the built-in swap's own mesh model runs
    inside the swap stage's time.
    """
    ts, ss = track.get("seconds", {}), swap.get("seconds", {})
    has_qa = "SwaplineQAGate" in node_seconds
    rows = {"decode": ts.get("decode", 0.0) + ss.get("decode", 0.0),
            "detect": ts.get("detect", 0.0), "embed": ts.get("embed", 0.0),
            "align/landmarks": ss.get("landmarks", 0.0), "swap": ss.get("swap", 0.0),
            "paste": ss.get("paste", 0.0), "restore": None,
            "QA": node_seconds.get("SwaplineQAGate") if has_qa else None,
            "encode": sum(node_seconds.get(k, 0.0) for k in ENCODERS)}
    rows = {k: (None if v is None else round(v, 3)) for k, v in rows.items()}
    rows["other"] = round(max(wall - sum(v for v in rows.values() if v is not None), 0.0), 3)
    loaders = sum(v for k, v in node_seconds.items() if k not in STAGE_NODES)
    detail = {"flow": round(ts.get("flow", 0.0), 3), "store": round(ss.get("store", 0.0), 3),
              "masks + guards": round(ss.get("masks", 0.0) + ss.get("guards", 0.0), 3),
              "model loading + face models + image loads": round(loaders, 3)}
    detail["untimed"] = round(max(rows["other"] - sum(detail.values()), 0.0), 3)
    inference = (rows["detect"] + rows["embed"] + rows["align/landmarks"]
                 + qa.get("detect", 0.0) + qa.get("embed", 0.0))
    core = inference + rows["decode"] + rows["encode"]
    pipeline_s = sum(node_seconds.get(k, 0.0) for k in STAGE_NODES)
    return {"seconds": rows, "other_detail": detail, "qa_detail": qa or None, "wall_s": round(wall, 3),
            "inference_s": round(inference, 3),
            "glue_share": round(1.0 - core / wall, 4) if wall > 0 else None,
            "fps": round(frames / wall, 3) if wall > 0 else None,
            "fps_pipeline_nodes": round(frames / pipeline_s, 3) if pipeline_s > 0 else None}


def run(frames: dict, clip_size, log=print, server=None) -> dict:
    """``frames``: label (short, long) -> frames of a clip generated at ``clip_size``. ``server``:
    one running ComfyServer for every clip (the CI smoke's), else a fresh one per clip."""
    from . import speed
    from .paths import WORK

    out = {"runs": {}, "peak_rss_mb": {}}
    for label, n in frames.items():
        clip = speed.clip_path(n, clip_size, log)
        log(f"rss: {label} clip ({clip.name}) through a fresh ComfyUI server")
        r = run_workflow(label, clip, WORK, log=log, server=server)
        out["runs"][label], out["peak_rss_mb"][label] = r, r["peak_rss_mb"]
        log(f"rss: {label}: peak {r['peak_rss_mb']:.0f} MB (idle {r['idle_rss_mb']:.0f} MB), {r['wall_s']:.1f} s")
    short, long_ = out["peak_rss_mb"].get("short"), out["peak_rss_mb"].get("long")
    out["peak_rss_ratio_long_vs_short"] = round(long_ / short, 3) if short and long_ else None
    return out


def body(data: dict) -> list[str]:
    from . import stages
    from .section import f, table

    runs = data["runs"]
    lines = ["## Per clip", ""] + table(
        ["clip", "frames", "prompt wall s", "fps (prompt)", "fps (track..encode nodes)", "idle RSS MB", "peak RSS MB",
         "frames with face", "detector frames"],
        [[label, r["frames"], f(r["wall_s"], 1), f(r["stages"]["fps"], 2), f(r["stages"].get("fps_pipeline_nodes"), 2),
          f(r["idle_rss_mb"], 0), f(r["peak_rss_mb"], 0), r["frames_with_face"],
          (r.get("tracker") or {}).get("detector_frames")] for label, r in runs.items()])
    return lines + ["", "## Per stage (s)", "", "From the Track/Swap nodes' reports, the QA Gate's report and "
                    "WebSocket node times (QA: the QA Gate node; encode: the Save Video / C2PA Sink node).", "",
                    *stages.markdown({f"server {k} ({r['frames']} frames)": r["stages"] for k, r in runs.items()}), ""]


SECTION = Section(
    name="rss", title="Peak memory of a ComfyUI server, long vs short clip: measurements",
    about="Peak RSS (process and children, sampled every 0.1 s) of a fresh real ComfyUI server running "
          "`workflows/api/video_swap_builtin.json` as shipped on a 3000-frame and on a 300-frame 1280x720 clip "
          "generated from the sample, and the per-stage times of those runs. Method: `bench/rss.py` (module "
          "docstring).",
    run=run, body=body,
    targets=(Target("peak_rss_ratio_long_vs_short", "<=", 1.5, "peak RSS on 3000 frames / on 300 frames"),),
    full={"frames": {"short": 300, "long": 3000}, "clip_size": [1280, 720]},
    quick={"frames": {"short": 300}},
    smoke={"frames": {"short": 4, "long": 8}, "clip_size": [320, 180]},
)
