"""The ``soak`` section: one real ComfyUI server under a studio's mixed queue, for a long while.

One fresh server (``--cpu``, our pack in custom_nodes) gets, in a fixed shuffled order, 200 image
prompts (``workflows/api/image_swap_builtin.json``) and 20 short video prompts
(``workflows/api/video_swap_builtin.json`` on 8 frames of the sample clip, QA and signing as shipped),
valid and bad inputs mixed, kept ``DEPTH`` deep in ComfyUI's queue as a queue client would. Every
``MAINT_EVERY`` finished prompts the client also reads ``/swapline/cache``, sweeps it, deletes one
finished job by its id and tries to delete one still queued (which must be refused with 409 and
then run normally). Some video prompts are interrupted (ComfyUI's targeted ``/interrupt``) while
their swap runs.

What each case must give (anything else is *failed*, the target is 0):

- valid image / video: completed, one image of the input's size / every frame written;
- image without a face: completed and returned unchanged (``no_face: pass through``);
- missing input file: refused by validation at queue time, the error naming the file;
- source photo without a face, corrupt video file: a node error of Swapline's own (a message that
  says what to do), not a crash;
- interrupted video: ``execution_interrupted`` for that prompt only.

Reported: outcomes per case, frames lost (target 0), the server's RSS (process tree) at each finished
prompt, first vs last quarter (growth target <= 10 %), and p50/p95 execution seconds per kind (from
the prompt's ``execution_start`` to its end; queue waiting is not counted).
"""
from __future__ import annotations

import json
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .paths import REPO, SAMPLE_CLIP
from .section import Section, Target, cli

IMAGE_WORKFLOW = REPO / "workflows" / "api" / "image_swap_builtin.json"
VIDEO_WORKFLOW = REPO / "workflows" / "api" / "video_swap_builtin.json"
SOURCE = REPO / "assets" / "samples" / "source_face_colour.png"
DEPTH = 4              # prompts kept in ComfyUI's queue
MAINT_EVERY = 20       # finished prompts between cache reads, sweeps and deletes
VIDEO_FRAMES = 8
# case -> share of its kind (the rest are valid)
IMAGE_CASES = {"no_face_target": 0.10, "missing_file": 0.05, "no_face_source": 0.05}
VIDEO_CASES = {"missing_file": 0.10, "corrupt_video": 0.10, "interrupt": 0.10}


@dataclass
class Job:
    n: int
    kind: str                      # image | video
    case: str                      # valid | no_face_target | missing_file | no_face_source | corrupt_video | interrupt
    prompt: dict
    target: str | None = None      # the image prompt's target file (for the unchanged check)
    pid: str | None = None
    started: float | None = None
    ended: float | None = None
    outcome: str | None = None     # completed | refused | node_error | interrupted | failed
    detail: str = ""
    interrupted: bool = False


def _node(prompt: dict, cls: str) -> str:
    return next(k for k, v in prompt.items() if v["class_type"] == cls)


def _images(prompt: dict) -> list[str]:
    return [k for k, v in prompt.items() if v["class_type"] == "LoadImage"]


def _is_source(node: dict) -> bool:
    """The shipped workflows title their source photo's loader "Source ..."."""
    return "Source" in node.get("_meta", {}).get("title", "")


def plan(images: int, videos: int, seed: int = 0) -> list[Job]:
    """The jobs in queue order (deterministic: the same run twice queues the same prompts)."""
    rng = random.Random(seed)

    def cases(n: int, shares: dict) -> list[str]:
        out = [c for c, s in shares.items() for _ in range(max(1, round(s * n)) if n >= len(shares) else 0)]
        return (out + ["valid"] * n)[:n]

    kinds = [("image", c) for c in cases(images, IMAGE_CASES)] + [("video", c) for c in cases(videos, VIDEO_CASES)]
    rng.shuffle(kinds)
    img, vid = json.loads(IMAGE_WORKFLOW.read_text()), json.loads(VIDEO_WORKFLOW.read_text())
    jobs = []
    for n, (kind, case) in enumerate(kinds):
        if kind == "image":
            p = json.loads(json.dumps(img))
            tgt = f"soak_noface_{n}.png" if case == "no_face_target" else f"soak_target_{n}.png"
            if case == "missing_file":
                tgt = f"soak_missing_{n}.png"
            src = "soak_noface_source.png" if case == "no_face_source" else "soak_source.png"
            for k in _images(p):
                p[k]["inputs"]["image"] = src if _is_source(p[k]) else tgt
            p[_node(p, "SaveImage")]["inputs"]["filename_prefix"] = f"soak/img_{n}"
            jobs.append(Job(n, kind, case, p, target=tgt))
        else:
            p = json.loads(json.dumps(vid))
            loader = _node(p, "SwaplineLoadVideo")
            video = {"missing_file": f"soak_missing_{n}.mp4",
                     "corrupt_video": "soak_corrupt.mp4"}.get(case, "soak_clip.mp4")
            p[loader]["inputs"].update(video=video, start=n % 40, count=VIDEO_FRAMES)
            for cls in ("SwaplineQAGate", "SwaplineC2PASink"):
                p[_node(p, cls)]["inputs"]["filename_prefix"] = f"soak/vid_{n}"
            for k in _images(p):
                p[k]["inputs"]["image"] = "soak_source.png" if _is_source(p[k]) else "soak_reference.png"
            jobs.append(Job(n, kind, case, p))
    return jobs


def stage_inputs(input_dir: Path, jobs: list[Job]) -> None:
    """Target images (sample clip frames, each stamped so ComfyUI's cache cannot serve it), face-less
    pictures, the source photo, the clip, and a corrupt video file."""
    from PIL import Image

    from swapline_core.video.frames import FrameSequence

    input_dir.mkdir(parents=True, exist_ok=True)
    frames = [f for _, ch in FrameSequence.open(str(SAMPLE_CLIP), chunk=16).iter_chunks() for f in ch]
    shutil.copy(SOURCE, input_dir / "soak_source.png")
    Image.fromarray(frames[0]).save(input_dir / "soak_reference.png")
    yy, xx = np.mgrid[0:256, 0:256]
    plain = np.stack([xx, yy, (xx + yy) // 2], -1).astype(np.uint8)      # a gradient: no face anywhere
    Image.fromarray(plain).save(input_dir / "soak_noface_source.png")
    shutil.copy(SAMPLE_CLIP, input_dir / "soak_clip.mp4")
    (input_dir / "soak_corrupt.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 64)
    for j in jobs:
        if j.kind != "image" or j.case == "missing_file":
            continue
        img = (plain if j.case == "no_face_target" else frames[j.n % len(frames)]).copy()
        img[0, 0] = (j.n % 256, j.n // 256, 7)      # a different file for every prompt
        Image.fromarray(img).save(input_dir / j.target)


def _quantile(xs: list[float], q: float) -> float | None:
    return round(float(np.quantile(xs, q)), 3) if xs else None


class Soak:
    """Runs the jobs on one server; ``server`` is a started devtools.comfy_harness.ComfyServer."""

    def __init__(self, server, jobs: list[Job], maint_every: int = MAINT_EVERY):
        from .rss import RssSampler

        self.server, self.jobs, self.maint_every = server, jobs, maint_every
        self.memory = RssSampler(server.proc.pid)      # its tree_rss only: no sampling thread
        self.by_pid: dict[str, Job] = {}
        self.maint = {"cache_reads": 0, "sweeps": 0, "deleted": 0, "refused_while_queued": 0, "errors": []}
        self.rss: list[float] = []
        self.done = 0

    def _queue(self, job: Job) -> None:
        from devtools.comfy_harness import PromptRejected

        try:
            job.pid = self.server.queue(job.prompt)
            self.by_pid[job.pid] = job
        except PromptRejected as exc:
            text = json.dumps(exc.body)
            # refused as it should be only when the error names the missing file
            named = job.case == "missing_file" and f"soak_missing_{job.n}" in text
            self._finish(job, "refused" if named else "failed", text[:400], queued=False)

    def _finish(self, job: Job, outcome: str, detail: str = "", queued: bool = True) -> None:
        job.outcome, job.detail = outcome, detail
        job.ended = time.perf_counter()
        self.done += 1
        if queued:
            self.rss.append(self.memory.tree_rss() / 2 ** 20)
        if self.done % self.maint_every == 0:
            self._maintenance()

    def _maintenance(self) -> None:
        import requests

        url = self.server.url
        checks = [("cache", requests.get(url + "/swapline/cache", timeout=60), 200),
                  ("sweep", requests.post(url + "/swapline/cache/sweep", json={}, timeout=120), 200)]
        finished = [j for j in self.jobs if j.outcome == "completed" and j.kind == "video" and not j.detail]
        if finished:
            j = finished[0]
            j.detail = "deleted by the soak client"
            checks.append(("delete finished", requests.post(url + "/swapline/jobs/delete", timeout=60, json={
                "job_id": j.pid, "requested_by": "soak", "request_id": f"soak-{j.n}"}), 200))
        waiting = [j for j in self.jobs if j.pid and j.outcome is None and j.started is None]
        if waiting:
            checks.append(("delete queued", requests.post(url + "/swapline/jobs/delete", timeout=60, json={
                "job_id": waiting[-1].pid, "requested_by": "soak"}), 409))
        for name, r, want in checks:
            if r.status_code != want:
                self.maint["errors"].append(f"{name}: HTTP {r.status_code} (expected {want}): {r.text[:200]}")
        self.maint["cache_reads"] += 1
        self.maint["sweeps"] += 1
        ok = [n for n, r, want in checks if r.status_code == want]
        self.maint["deleted"] += ok.count("delete finished")
        self.maint["refused_while_queued"] += ok.count("delete queued")

    def _on_event(self, msg: dict) -> None:
        data = msg.get("data") or {}
        job = self.by_pid.get(data.get("prompt_id"))
        if job is None or job.outcome is not None:
            return
        kind = msg.get("type")
        if kind == "execution_start":
            job.started = time.perf_counter()
        elif kind == "executing" and data.get("node") is not None and job.case == "interrupt" and not job.interrupted:
            if job.prompt.get(str(data["node"]), {}).get("class_type") == "SwaplineSwapFrames":
                import requests

                requests.post(self.server.url + "/interrupt", json={"prompt_id": job.pid}, timeout=10)
                job.interrupted = True
        elif kind == "execution_error":
            etype = str(data.get("exception_type", ""))
            ours = "swapline" in etype.lower() and job.case in ("no_face_source", "corrupt_video")
            self._finish(job, "node_error" if ours else "failed",
                         f"{data.get('node_type')}: {etype}: {str(data.get('exception_message', ''))[:300]}")
        elif kind == "execution_interrupted":
            self._finish(job, "interrupted" if job.case == "interrupt" else "failed", "interrupted")
        elif kind == "executing" and data.get("node") is None:
            self._finish(job, *self._check_outputs(job))

    def _check_outputs(self, job: Job) -> tuple[str, str]:
        """(outcome, detail) of a prompt that ran to its end."""
        from PIL import Image

        if job.case != "valid" and job.case != "no_face_target":
            return "failed", f"case {job.case} ran to its end without an error"
        outputs = self.server.history(job.pid).get("outputs", {})
        if job.kind == "video":
            ui = next((o["swapline_video"][0] for o in outputs.values() if "swapline_video" in o), None) or \
                next((o["swapline_signing"][0]["results"][0] for o in outputs.values() if "swapline_signing" in o), {})
            written = ui.get("frames")
            return ("completed", "") if written == VIDEO_FRAMES else \
                ("failed", f"frames lost: wrote {written} of {VIDEO_FRAMES}")
        items = [it for o in outputs.values() for it in o.get("images", []) if it.get("type") == "output"]
        if len(items) != 1:
            return "failed", f"frames lost: {len(items)} images out of 1"
        out = np.asarray(Image.open(self.server.output_path(items[0])).convert("RGB"))
        inp = np.asarray(Image.open(self.server.base_dir / "input" / job.target).convert("RGB"))
        if out.shape != inp.shape:
            return "failed", f"output {out.shape} for input {inp.shape}"
        if job.case == "no_face_target" and np.abs(out.astype(np.int16) - inp).max() > 1:
            return "failed", "a picture without a face came back changed"
        return "completed", ""

    def run(self, timeout: float = 600.0) -> None:
        import websocket

        ws = self.server.connect()
        ws.settimeout(1.0)
        todo = list(self.jobs)
        t_last = time.perf_counter()
        try:
            while todo or any(j.outcome is None and j.pid for j in self.jobs):
                while todo and sum(1 for j in self.jobs if j.pid and j.outcome is None) < DEPTH:
                    self._queue(todo.pop(0))
                try:
                    raw = ws.recv()
                except websocket.WebSocketTimeoutException:
                    if time.perf_counter() - t_last > timeout:
                        raise TimeoutError(f"no event for {timeout} s with prompts in flight") from None
                    continue
                t_last = time.perf_counter()
                if isinstance(raw, str):
                    self._on_event(json.loads(raw))
        finally:
            ws.close()
        self._maintenance()         # a last round once the queue is empty

    def summary(self) -> dict:
        by_case: dict = {}
        for j in self.jobs:
            row = by_case.setdefault(f"{j.kind}/{j.case}", {})
            row[j.outcome] = row.get(j.outcome, 0) + 1
        failed = [f"{j.kind} #{j.n} ({j.case}): {j.detail}" for j in self.jobs if j.outcome == "failed"]
        q = max(1, len(self.rss) // 4)
        first, last = float(np.median(self.rss[:q])), float(np.median(self.rss[-q:]))
        lat = {k: [j.ended - j.started for j in self.jobs if j.kind == k and j.outcome == "completed" and j.started]
               for k in ("image", "video")}
        outcomes = {o: sum(1 for j in self.jobs if j.outcome == o)
                    for o in ("completed", "refused", "node_error", "interrupted", "failed")}
        res = {"prompts": len(self.jobs), "outcomes": outcomes, "by_case": by_case, "failed": outcomes["failed"],
               "failures": failed[:20],
               "frames_lost": sum(1 for j in self.jobs if j.outcome == "failed" and "frames lost" in j.detail),
               "rss_first_quarter_mb": round(first, 1), "rss_last_quarter_mb": round(last, 1),
               "rss_growth": round(last / first - 1.0, 4) if first > 0 else None,
               "latency_s": {k: {"p50": _quantile(v, 0.5), "p95": _quantile(v, 0.95), "n": len(v)}
                             for k, v in lat.items()},
               "maintenance": {**{k: v for k, v in self.maint.items() if k != "errors"},
                               "errors": self.maint["errors"][:20]},
               "maintenance_errors": len(self.maint["errors"])}
        return res


def run(images: int, videos: int, work: Path | None = None, *, log=print, maint_every: int = MAINT_EVERY) -> dict:
    from devtools.comfy_harness import ComfyServer

    from .paths import WORK

    work = Path(work) if work else WORK / "soak"
    shutil.rmtree(work, ignore_errors=True)
    (work / "models").mkdir(parents=True)
    server = ComfyServer(work / "server", work / "models")
    jobs = plan(images, videos)
    t0 = time.perf_counter()
    server.start()
    try:
        stage_inputs(server.base_dir / "input", jobs)
        soak = Soak(server, jobs, maint_every=maint_every)
        soak.run()
        res = soak.summary()
    finally:
        server.stop()
    res["wall_s"] = round(time.perf_counter() - t0, 1)
    log(f"soak: {json.dumps(res['outcomes'])}, frames lost {res['frames_lost']}, RSS "
        f"{res['rss_first_quarter_mb']} -> {res['rss_last_quarter_mb']} MB, {res['wall_s']} s")
    return res


def body(res: dict) -> list[str]:
    from .section import table

    lat, m = res["latency_s"], res["maintenance"]
    lines = [f"Server RSS, first -> last quarter: {res['rss_first_quarter_mb']} -> {res['rss_last_quarter_mb']} "
             "MB.", "",
             "## Outcomes", "", *table(["kind/case", *res["outcomes"]],
                                       [[case, *(row.get(o, 0) for o in res["outcomes"])]
                                        for case, row in sorted(res["by_case"].items())]), "",
             "## Execution seconds (completed prompts; queue waiting not counted)", "",
             *table(["kind", "p50", "p95", "prompts"], [[k, v["p50"], v["p95"], v["n"]] for k, v in lat.items()]), "",
             f"Maintenance: {m['cache_reads']} cache reads, {m['sweeps']} sweeps, {m['deleted']} finished jobs "
             f"deleted, {m['refused_while_queued']} deletes of queued prompts refused (409). Wall time "
             f"{res['wall_s']} s.", ""]
    if res["failures"] or m["errors"]:
        lines += ["## What failed", "", *[f"- {x}" for x in res["failures"] + m["errors"]], ""]
    return lines


SECTION = Section(
    name="soak", title="Soak: one ComfyUI server under a mixed queue: measurements", opt_in=True,
    about=lambda res: (f"{res['prompts']} prompts (image and video, valid and bad inputs mixed) on one fresh "
                       "ComfyUI server, with cache reads, sweeps, deletes and interrupts in between. Method: "
                       "`bench/soak.py` (module docstring)."),
    run=run, body=body,
    targets=(Target("failed", "<=", 0, "prompts that failed otherwise than their case must"),
             Target("frames_lost", "<=", 0, "video frames missing from a completed prompt's output"),
             Target("rss_growth", "<=", 0.10, "server RSS, last quarter of the prompts / first quarter - 1"),
             Target("maintenance_errors", "<=", 0, "cache reads, sweeps or deletes answered wrongly")),
    full={"images": 200, "videos": 20, "maint_every": MAINT_EVERY},
    smoke={"images": 6, "videos": 4, "maint_every": 3},
)
FULL, SMOKE = SECTION.full, SECTION.smoke

if __name__ == "__main__":
    raise SystemExit(cli(SECTION, module="bench.soak"))
