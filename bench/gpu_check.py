"""GPU check (issue 33): per-model inference time of exact-size stand-ins, and the shipped video job end to end.

``scripts/gpu_check.sh`` runs this with onnxruntime-gpu on a machine with an NVIDIA GPU, or as its
CPU fallback (``--cpu-fallback``: tiny batches, a tiny clip) so CI keeps every code path alive.

1. **Stand-ins** (devtools/standins): ArcFace R50, SCRFD-10G-KPS, INSwapper-128, GHOST AEI-Net 256,
   GFPGAN v1.4 and GPEN-BFR-512 at their published sizes with random weights; parameters and FLOPs
   against the published figures.
2. **Per model**: milliseconds per face (per frame for the detector) at batch 1/8/32 through the
   pack's own session code (``create_session`` + ``BatchRun``: the provider each session really
   got, IO binding on CUDA), median of repeated runs after a warm-up, and device memory in use.
3. **End to end**: ``workflows/api/video_swap.json`` (buffalo_l + inswapper_128, QA every frame,
   signed) through a real ComfyUI at 720p and 1080p with one face: swap only (no QA), swap + GFPGAN
   (Restore Faces in Frames), and as shipped (QA on every frame). Models: the inswapper_128 and
   w600k_r50 stand-ins (timing-exact), GFPGANv1.4 of the real size (random weights), and the test
   suite's detector and 68-point landmark stand-ins: a random SCRFD finds no faces, so the job's
   detector is MTCNN's O-Net in SCRFD form (devtools/synthetic_models), which is *not* SCRFD-10G's
   cost; the per-model table has that. Random swap weights give noise faces, so the QA gate
   rejects them; its cost is what is measured.
"""
from __future__ import annotations

import json
import platform
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

from .paths import OUT, REPO
from .section import Section, Target

GPU_BATCHES, CPU_BATCHES = (1, 8, 32), (1, 2)
WORKFLOW = REPO / "workflows" / "api" / "video_swap.json"
VARIANTS = ("swap", "swap+gfpgan", "swap+qa")
SIZES = {"720p": (1280, 720), "1080p": (1920, 1080)}


def device_info() -> dict:
    import onnxruntime as ort
    import torch

    info = {"python": platform.python_version(), "torch": torch.__version__, "onnxruntime": ort.__version__,
            "onnxruntime_providers": ort.get_available_providers(), "cuda": torch.cuda.is_available(),
            "cpu": platform.processor() or platform.machine()}
    if torch.cuda.is_available():
        info.update(gpu=torch.cuda.get_device_name(0), torch_cuda=torch.version.cuda,
                    gpu_memory_gb=round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1),
                    driver=_driver())
    return info


def _driver() -> str | None:
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def _gpu_used_mb() -> float | None:
    """Device-wide memory in use (every process, onnxruntime's arenas and torch's cache included)."""
    import torch

    if not torch.cuda.is_available():
        return None
    free, total = torch.cuda.mem_get_info()
    return round((total - free) / 2**20, 1)


class GpuMemorySampler(threading.Thread):
    """Peak GPU memory of every process on the GPU but this one (the ComfyUI server under test), from
    ``nvidia-smi --query-compute-apps`` every half second: the figure the issue's 8 GB target is about.
    ``peak`` stays None where nvidia-smi cannot be run (CPU)."""

    def __init__(self, interval: float = 0.5):
        super().__init__(daemon=True)
        self.interval = interval
        self.peak: float | None = None
        self._halt = threading.Event()

    def _read(self) -> float | None:
        import os
        import subprocess

        try:
            query = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
            out = subprocess.run(query, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        if out.returncode != 0:
            return None
        rows = [line.split(",") for line in out.stdout.strip().splitlines() if "," in line]
        return float(sum(float(mb) for pid, mb in rows if int(pid) != os.getpid()))

    def run(self) -> None:
        while not self._halt.is_set():
            used = self._read()
            if used is not None:
                self.peak = max(self.peak or 0.0, used)
            self._halt.wait(self.interval)

    def stop(self) -> float | None:
        self._halt.set()
        self.join(15)
        return self.peak


def time_model(name: str, path: Path, provider: str, batches, repeats: int) -> dict:
    """ms per item at each batch size through the pack's session code, median of ``repeats`` runs."""
    from devtools.standins import module
    from swapline_core.backends.onnx_batch import BatchRun
    from swapline_core.backends.onnx_sessions import create_session
    from swapline_core.backends.trt_profile import FACES, Batches

    spec = module(name).SPEC
    # the pack's TensorRT profile for a chunk's faces, reaching the largest batch timed here
    profile = Batches(opt=min(FACES.opt, max(batches)), max=max(FACES.max, max(batches)))
    session = create_session(str(path), provider, profile)
    run = BatchRun(session, max_batch=max(batches))
    dtypes = {i.name: np.float16 if "float16" in i.type else np.float32 for i in session.get_inputs()}
    rng = np.random.default_rng(0)
    row = {"name": name, "role": spec.role, "providers": session.get_providers(), "io_binding": run.io_binding,
           "batch_fixed_by_graph": run.fixed, "ms_per_item": {}, "gpu_used_mb": None}
    peak = _gpu_used_mb()
    for b in batches:
        feeds = {n: rng.random((b, *shape)).astype(dtypes[n]) for n, shape in spec.inputs}
        run(feeds, max_batch=b)                                   # warm-up: allocations, kernel choice
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            run(feeds, max_batch=b)
            times.append(time.perf_counter() - t0)
        row["ms_per_item"][str(b)] = round(statistics.median(times) * 1000 / b, 2)
        used = _gpu_used_mb()
        peak = max(peak, used) if used is not None and peak is not None else used
    row["gpu_used_mb"] = peak
    row["largest_batch_run"] = run.largest
    first, last = row["ms_per_item"][str(batches[0])], row["ms_per_item"][str(batches[-1])]
    row["batch_gain"] = round(first / last, 3) if last else None   # >= 1: batching costs nothing
    return row


# ------------------------------------------------------------------------------- end to end
def e2e_models(folder: Path) -> dict[str, Path]:
    """The suite's buffalo_l stand-ins with the timing-exact recogniser and swapper put in."""
    from devtools.standins.export import build as build_standins
    from devtools.synthetic_models import build_models

    files = build_models(folder)
    exact = build_standins(("arcface_r50", "inswapper_128"))
    for role, name in (("recognizer", "arcface_r50"), ("swapper", "inswapper_128")):
        files[role].unlink()              # a hard link into the synthetic cache: replace, never write
        try:
            files[role].hardlink_to(exact[name])
        except OSError:
            shutil.copy(exact[name], files[role])
    return files


def variant_prompt(variant: str) -> dict:
    """workflows/api/video_swap.json as shipped ("swap+qa"), without the QA gate ("swap"), or with
    Restore Faces in Frames (GFPGANv1.4) between the swap and the QA gate ("swap+gfpgan")."""
    prompt = json.loads(WORKFLOW.read_text())
    by_class = {n["class_type"]: nid for nid, n in prompt.items()}
    swap, track, qa, sink = (by_class[c] for c in ("SwaplineSwapFrames", "SwaplineTrackFaces",
                                                   "SwaplineQAGate", "SwaplineC2PASink"))
    if variant in ("swap", "swap+gfpgan"):
        frames = [swap, 0]
        if variant == "swap+gfpgan":
            prompt["90"] = {"class_type": "SwaplineRestorerLoader",
                            "inputs": {"restorer": "GFPGANv1.4.pth", "codeformer_fidelity": 0.5, "mask_blur": 0.1}}
            prompt["91"] = {"class_type": "SwaplineRestoreFrames",
                            "inputs": {"frames": [swap, 0], "faces": [track, 0], "restorer": ["90", 0],
                                       "weight": 1.0, "batch": 8}}
            frames = ["91", 0]
        del prompt[qa]
        prompt[sink]["inputs"]["frames"] = frames
        prompt[sink]["inputs"].pop("qa", None)
    return prompt


def run_e2e(clips: dict[str, Path], variants, models: Path, work: Path, gpu: bool, log=print) -> dict:
    from . import rss, server_job

    out = {}
    for label, clip in clips.items():
        for variant in variants:
            key = f"{label}/{variant}"
            log(f"gpu_check: end to end {key}")
            prompt = variant_prompt(variant)
            sampler = GpuMemorySampler()
            if gpu:
                sampler.start()
            try:
                r = rss.run_workflow(f"gpu-{label}-{variant.replace('+', '-')}", clip, work, log=log, prompt=prompt,
                                     models=models, device="gpu" if gpu else "cpu", qa_sample_every=1)
            finally:
                server_gpu_peak = sampler.stop() if gpu else None
            s = server_job.summarize(r)
            out[key] = {"frames": s["frames"], "wall_s": s["wall_s"], "fps": round(s["frames"] / s["wall_s"], 3),
                        "qa_share": s["qa_share"], "stage_seconds": s["stage_seconds"],
                        "peak_rss_mb": s["peak_rss_mb"], "server_gpu_peak_mb": server_gpu_peak,
                        "swap_inference": r.get("swap_inference")}
            log(f"gpu_check: {key}: {out[key]['fps']} fps")
    return out


def clips_for(cpu_fallback: bool, log=print) -> dict[str, Path]:
    from . import media

    if cpu_fallback:                    # code path only: a few frames, small
        return {"sample8": media.generated_clip(8, log=log, size=(480, 270))}
    return {label: media.generated_clip(120, log=log, size=size) for label, size in SIZES.items()}


def run(cpu_fallback: bool, names=None, variants=VARIANTS, repeats: int | None = None, work: Path | None = None,
        log=print) -> dict:
    from devtools.standins import NAMES
    from devtools.standins.export import build, size_row

    names = tuple(names or NAMES)
    work = Path(work or OUT / "gpu_check" / "work")
    info = device_info()
    gpu = info["cuda"] and "CUDAExecutionProvider" in info["onnxruntime_providers"] and not cpu_fallback
    provider = "CUDA" if gpu else "CPU"
    batches, default_repeats = (GPU_BATCHES, 10) if gpu else (CPU_BATCHES, 1)
    repeats = repeats or default_repeats
    log(f"gpu_check: {'GPU ' + info.get('gpu', '') if gpu else 'CPU fallback'}; stand-ins {', '.join(names)}")
    result = {"mode": "gpu" if gpu else "cpu-fallback", "device": info, "provider_asked": provider,
              "batches": list(batches), "repeats": repeats}
    result["standins"] = [size_row(n) for n in names]
    paths = build(names)
    result["models"] = [time_model(n, paths[n], provider, batches, repeats) for n in names]
    for row in result["models"]:
        log(f"gpu_check: {row['name']}: {row['ms_per_item']} ms per item on {row['providers'][0]}")
    if variants:
        work.mkdir(parents=True, exist_ok=True)
        models = e2e_models(work / "models")
        result["end_to_end"] = run_e2e(clips_for(cpu_fallback, log), variants, models["swapper"].parents[1],
                                       work, gpu, log)
    return result


def body(result: dict) -> list[str]:
    from devtools.standins import module

    d = result["device"]
    gpu = result["mode"] == "gpu"
    if not gpu:
        lines = ["**No GPU was available for this run.** The figures below are the CPU fallback "
                 f"({d.get('cpu')}, onnxruntime {d['onnxruntime']}, providers "
                 f"{', '.join(d['onnxruntime_providers'])}): "
                 "they prove the code path, they are not GPU figures. On a machine with an NVIDIA GPU, "
                 "`scripts/gpu_check.sh --doc` installs onnxruntime-gpu in its own overlay venv and rewrites "
                 "this page with the GPU's name, driver, versions and date.", ""]
    else:
        lines = [f"GPU: {d.get('gpu')} ({d.get('gpu_memory_gb')} GiB), driver {d.get('driver')}, CUDA (torch) "
                 f"{d.get('torch_cuda')}, torch {d['torch']}, onnxruntime {d['onnxruntime']}.", ""]
    lines += ["## Stand-ins against the published figures", "",
              "| model | role | parameters | published | ratio | G per item (convention) | published G |",
              "|---|---|---|---|---|---|---|"]
    for r in result["standins"]:
        conv = "MACs" if r["flops_convention"] == "MACs" else "FLOPs"
        lines.append(f"| {r['name']} | {r['role']} | {r['params'] / 1e6:.3f} M | {r['published_params'] / 1e6:.3f} M | "
                     f"{r['params_ratio']} | {r['gflops']} ({conv}) | {r['published_gflops'] or 'not published'} |")
    lines += ["", "Where each published figure comes from:"]
    lines += [f"- {r['name']}: {r['source']}" for r in result["standins"]]
    notes = [(r["name"], n) for r in result["standins"] for n in r.get("notes") or ()]
    if notes:
        lines += ["", "Notes:"] + [f"- {name}: {n}" for name, n in notes]
    approx = [(r["name"], r["approximated"]) for r in result["standins"] if r["approximated"]]
    if approx:
        lines += ["", "What is approximated:"] + [f"- {n}: {a}" for n, a in approx]
    lines += ["", f"## Per model: ms per item (face; frame for the detector), median of {result['repeats']} "
                  "run(s) after a warm-up", "",
              "| model | input | " + " | ".join(f"batch {b}" for b in result["batches"]) +
              " | batch gain | session providers | IO binding | device memory in use MB |",
              "|---|---|" + "---|" * len(result["batches"]) + "---|---|---|---|"]
    for r in result["models"]:
        shape = " + ".join(f"{n}{list(s)}" for n, s in module(r["name"]).SPEC.inputs)
        fixed = " (graph batch fixed: run item by item)" if r["batch_fixed_by_graph"] else ""
        per_batch = " | ".join(str(r["ms_per_item"].get(str(b))) for b in result["batches"])
        lines.append(f"| {r['name']} | {shape} | {per_batch}"
                     + f" | {r['batch_gain']}{fixed} | {', '.join(r['providers'])} | {r['io_binding']} | "
                       f"{r['gpu_used_mb'] if r['gpu_used_mb'] is not None else 'n/a'} |")
    slower = [f"{r['name']} {r['batch_gain']}" for r in result["models"] if r["batch_gain"] and r["batch_gain"] < 1]
    lines += ["", "Batch gain = ms per item at batch 1 / at the largest batch (>= 1: batching costs nothing). "
                  + (f"Below 1 in this run: {', '.join(slower)}." if slower
                     else "At least 1 for every model in this run.")
              + ("" if gpu else " On CPU onnxruntime already spreads each operator over the cores, so a batch "
                                "has little to win; differences of a few percent are within this machine's "
                                "run-to-run noise.")]
    if result.get("end_to_end"):
        lines += ["", "## End to end: workflows/api/video_swap.json through a real ComfyUI", "",
                  "| clip / variant | frames | wall s | fps | QA share | swapper session, largest batch | "
                  "peak RSS MB | server GPU memory peak MB |",
                  "|---|---|---|---|---|---|---|---|"]
        for k, r in result["end_to_end"].items():
            inf = next(iter((r.get("swap_inference") or {}).values()), {})
            session = f"{(inf.get('providers') or ['?'])[0]}, batch {inf.get('largest_batch_run')}"
            gpu_mb = r["server_gpu_peak_mb"] if r.get("server_gpu_peak_mb") is not None else "n/a"
            lines.append(f"| {k} | {r['frames']} | {r['wall_s']} | {r['fps']} | {r['qa_share']} | {session} | "
                         f"{r['peak_rss_mb']} | {gpu_mb} |")
        lines += ["", "Models: inswapper_128 and w600k_r50 stand-ins (exact size), GFPGANv1.4.pth of the real size, "
                      "and the test suite's detector (MTCNN's O-Net in SCRFD form, not SCRFD-10G's cost) and "
                      "68-point landmark stand-ins; random swap weights make noise faces, so QA rejects them "
                      "(its cost is what is measured)."]
    lines += ["", "Output unchanged by batching: tests/unit/backends/test_batch_parity.py."]
    return lines


def figures(result: dict) -> dict:
    e2e = result.get("end_to_end") or {}
    gains = [r["batch_gain"] for r in result["models"] if r.get("batch_gain") is not None]
    gpu_mb = [r["server_gpu_peak_mb"] for r in e2e.values() if r.get("server_gpu_peak_mb") is not None]
    return {"fps 1080p swap": (e2e.get("1080p/swap") or {}).get("fps"),
            "fps 1080p swap+gfpgan": (e2e.get("1080p/swap+gfpgan") or {}).get("fps"),
            "qa_share 1080p": (e2e.get("1080p/swap+qa") or {}).get("qa_share"),
            "gpu_memory_peak_mb": max(gpu_mb, default=None), "batch_gain_min": min(gains, default=None)}


def _no_gpu(result: dict) -> str | None:
    return None if result.get("mode") == "gpu" else "no GPU: CPU fallback"


SECTION = Section(
    name="gpu_check", page="gpu.md", title="GPU path (issue 33): measurements", opt_in=True,
    about="Exact-size stand-ins per model at batch 1/8/32 through the pack's session code, and "
          "`workflows/api/video_swap.json` end to end at 720p and 1080p on a real ComfyUI (swap only, + GFPGAN, QA "
          "every frame). Targets from issue 33 (one lent H200). Method: `bench/gpu_check.py` (module docstring).",
    run=run, figures=figures, body=body,
    targets=(Target("fps 1080p swap", ">=", 60, "swap only, one face, end to end", unjudged=_no_gpu),
             Target("fps 1080p swap+gfpgan", ">=", 30, "swap + GFPGAN, end to end", unjudged=_no_gpu),
             Target("qa_share 1080p", "<=", 0.30, "QA on every frame: its share of the wall", unjudged=_no_gpu),
             Target("gpu_memory_peak_mb", "<=", 8192, "the server's GPU memory, worst variant", unjudged=_no_gpu),
             Target("batch_gain_min", ">=", 1.0, "ms per item at batch 1 / at the largest batch, worst model")),
    full={"cpu_fallback": False}, smoke={"cpu_fallback": True},
)


def main(argv=None) -> int:
    import argparse

    from . import section

    ap = argparse.ArgumentParser(prog="scripts/gpu_check.sh", description=__doc__.splitlines()[0])
    ap.add_argument("--cpu-fallback", action="store_true", help="no GPU: tiny batches and clip, code path only")
    ap.add_argument("--models", default="", help="comma-separated stand-in names (default: all)")
    ap.add_argument("--no-e2e", action="store_true", help="skip the end-to-end workflow runs")
    ap.add_argument("--repeats", type=int, default=0, help="timed runs per batch size (default: 10 on GPU, 1 on CPU)")
    ap.add_argument("--out", default=str(OUT / "gpu_check"), help="folder for gpu_check.json, gpu.md and work files")
    ap.add_argument("--doc", action="store_true", help="also write docs/measurements/gpu.md")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = ap.parse_args(argv)
    out = Path(args.out)
    st = section.stamp("scripts/gpu_check.sh " + " ".join(argv))
    rec = section.execute(SECTION, {"names": [n for n in args.models.split(",") if n] or None,
                                    "variants": [] if args.no_e2e else list(VARIANTS),
                                    "repeats": args.repeats or None, "work": str(out / "work")},
                          smoke=args.cpu_fallback)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps({"run": st, **rec["data"], "targets": rec["targets"]}, indent=1,
                                                   default=str))
    (out / "gpu.md").write_text(section.page(SECTION, rec, st))
    if args.doc:     # the CPU fallback's page says plainly that no GPU was there
        print(f"wrote {section.write(SECTION, {**rec, 'smoke': False}, st)}")
    print(f"wrote {out / 'gpu_check.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
