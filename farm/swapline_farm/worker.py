"""A farm worker: one ComfyUI server process, owned by one Ray actor.

ComfyProcess starts ComfyUI from a configured folder with an isolated base directory (its own
input, output, temp and user folders, so workers on one machine never see each other's files and
ComfyUI's wipe of its temp folder at start-up hits nobody else), the Swapline pack and the other
custom nodes of that ComfyUI linked in, and the models folder shared. A chunk is an API prompt
queued over HTTP and followed over the WebSocket; how it ends decides the error class
(errors.py). ComfyWorker wraps it as a threaded Ray actor with a watchdog that restarts the
process when it dies, so a crashed ComfyUI rejoins the farm by itself.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import ray
import requests
import websocket

from . import PACK_DIR
from .errors import ChunkTimeout, InputError, TransientError, classify_execution_error
from .prompts import FACES, SAVE_NODE

# Model folder names the pack and ComfyUI use, mapped under the shared models folder.
MODEL_FOLDERS = {"checkpoints": "checkpoints", "vae": "vae", "controlnet": "controlnet", "loras": "loras",
                 "upscale_models": "upscale_models", "insightface": "insightface",
                 "facerestore_models": "facerestore_models", "swapline_faces": "swapline/faces",
                 "facemask": "facemask", "hyperswap": "hyperswap", "reswapper": "reswapper",
                 "facefusion": "facefusion"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


LAUNCHER = Path(__file__).resolve().with_name("comfy_launch.py")


def spawn_comfy(python: str, comfy_dir, args, **popen_kw) -> subprocess.Popen:
    """Start `python main.py ARGS` in `comfy_dir` so that it dies with this process, whatever kills it.

    Nothing runs between fork and exec (no preexec_fn: the actor runs threads): the child leads a
    session of its own (start_new_session, so it and what it starts are signalled as one group) and
    comfy_launch.py, in the child, SIGKILLs that group once this process is gone -- so no orphaned
    ComfyUI keeps a port or a GPU. The pid is ComfyUI's own (it runs main.py in-process)."""
    cmd = [python, str(LAUNCHER), str(os.getpid()), "main.py", *args]
    return subprocess.Popen(cmd, cwd=comfy_dir, start_new_session=True, **popen_kw)


def comfy_env(base: dict, gpu_ids, cpu: bool) -> dict:
    """A worker's ComfyUI environment: CUDA_VISIBLE_DEVICES names its GPUs (Ray sets it for the
    actor too; set here so the ComfyUI sees exactly what the worker was given, whatever the
    actor's environment); a CPU worker gets none, so it cannot pick up a GPU; otherwise inherited."""
    env = dict(base, PYTHONUNBUFFERED="1", DO_NOT_TRACK="1")
    if gpu_ids or cpu:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpu_ids)
    return env


class ComfyProcess:
    def __init__(self, comfy_path: str, port: int = 0, base_dir: str | None = None, extra_args=(),
                 pack: str | None = None, models_dir: str | None = None, cpu: bool = True,
                 python: str | None = None, gpu_ids=()):
        self.comfy = Path(comfy_path).resolve()
        if not (self.comfy / "main.py").is_file():
            raise InputError(f"ComfyUI path {self.comfy}: no main.py there; give the folder of a ComfyUI checkout "
                             "(--comfy, or comfy_path in the farm config)")
        self.port = port or free_port()
        self.base = Path(base_dir or f"/tmp/swapline-farm-worker-{self.port}").resolve()
        self.extra_args = list(extra_args)
        self.pack = Path(pack).resolve() if pack else PACK_DIR
        self.models_dir = Path(models_dir).resolve() if models_dir else self.comfy / "models"
        # The GPUs this ComfyUI may use (Ray's ids for the actor): exactly those are visible to it,
        # so N workers on N GPUs never share one.
        self.gpu_ids = [str(g) for g in gpu_ids]
        self.cpu = cpu and not self.gpu_ids
        self.python = python or sys.executable
        self.proc: subprocess.Popen | None = None
        self.log_path = self.base / "comfyui.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- lifecycle ---------------------------------------------------------------------------
    def prepare(self) -> None:
        for sub in ("custom_nodes", "input", "output", "user/default", "models/swapline/faces"):
            (self.base / sub).mkdir(parents=True, exist_ok=True)
        # The ComfyUI's own custom nodes, with the Swapline pack this farm ships with in front.
        links = {}
        src_nodes = self.comfy / "custom_nodes"
        if src_nodes.is_dir():
            links = {p.name: p for p in src_nodes.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}
        if self.pack is not None:
            links["swapline"] = self.pack
        for name, target in links.items():
            link = self.base / "custom_nodes" / name
            if link.is_symlink() and os.readlink(link) != str(target):
                link.unlink()
            if not link.exists():
                link.symlink_to(target, target_is_directory=True)
        settings = self.base / "user" / "default" / "comfy.settings.json"
        if not settings.exists():
            settings.write_text(json.dumps({"Comfy.TutorialCompleted": True}))
        lines = ["swapline_farm:", f"    base_path: {self.models_dir}"]
        lines += [f"    {k}: {v}" for k, v in MODEL_FOLDERS.items()]
        (self.base / "extra_model_paths.yaml").write_text("\n".join(lines) + "\n")

    def start(self, timeout: float = 180.0) -> None:
        self.prepare()
        if not self._port_free():
            self.port = free_port()
        args = ["--listen", "127.0.0.1", "--port", str(self.port), "--disable-auto-launch",
                "--base-directory", str(self.base), "--database-url", "sqlite:///:memory:",
                "--extra-model-paths-config", str(self.base / "extra_model_paths.yaml"),
                *(["--cpu"] if self.cpu else []), *self.extra_args]
        env = comfy_env(os.environ, self.gpu_ids, self.cpu)
        with open(self.log_path, "ab") as log:
            self.proc = spawn_comfy(self.python, self.comfy, args, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise TransientError(f"ComfyUI exited with {self.proc.returncode} at start:\n{self.log_tail()}")
            try:
                r = requests.get(self.url + "/system_stats", timeout=2)
                # another process may have taken the port first: ours names its base directory
                if r.ok and str(self.base) in r.json().get("system", {}).get("argv", []):
                    break
            except (requests.RequestException, ValueError):
                pass
            time.sleep(0.5)
        else:
            self.kill()
            raise TransientError(f"ComfyUI did not become ready in {timeout:.0f}s:\n{self.log_tail()}")
        bad = [ln for ln in self.log_text().splitlines() if "IMPORT FAILED" in ln or
               ("[Swapline]" in ln and "disabled" in ln)]
        if bad:
            self.stop()
            raise InputError("custom nodes failed to import in the worker's ComfyUI:\n" + "\n".join(bad))

    def _port_free(self) -> bool:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", self.port))
                return True
            except OSError:
                return False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.alive():
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        if self.alive():
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, n: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-n:])

    def health(self) -> dict:
        out = {"alive": self.alive(), "pid": self.proc.pid if self.proc else None, "port": self.port,
               "url": self.url, "base_dir": str(self.base), "gpus": list(self.gpu_ids)}
        if not out["alive"]:
            return {**out, "ok": False}
        try:
            r = requests.get(self.url + "/queue", timeout=5)
            r.raise_for_status()
            q = r.json()
            out.update(ok=True, running=len(q.get("queue_running", [])), pending=len(q.get("queue_pending", [])))
        except (requests.RequestException, ValueError) as exc:
            out.update(ok=False, error=str(exc))
        return out

    # -- chunks ------------------------------------------------------------------------------
    def stage(self, files: dict | None) -> None:
        """Put a job's files where this ComfyUI reads them (hard link when possible, else copy)."""
        for name, (src, kind) in (files or {}).items():
            folder = self.base / ("models/swapline/faces" if kind == FACES else "input")
            dest = folder / name
            if not os.path.isfile(src):
                raise InputError(f"job file {src} does not exist (or is not reachable from this worker's machine)")
            if dest.exists() and dest.stat().st_size == os.path.getsize(src):
                continue
            tmp = folder / f".{name}.{uuid.uuid4().hex[:8]}"
            try:
                os.link(src, tmp)
            except OSError:
                shutil.copyfile(src, tmp)
            os.replace(tmp, dest)

    def run(self, prompt: dict, timeout_s: float, files: dict | None = None) -> dict:
        """Run one chunk prompt; {"outputs": [paths], "seconds", "prompt_id", "frames"} or a FarmError."""
        t0 = time.time()
        self.stage(files)
        client = uuid.uuid4().hex
        try:
            ws = websocket.WebSocket()
            ws.connect(f"ws://127.0.0.1:{self.port}/ws?clientId={client}", timeout=10)
        except (OSError, websocket.WebSocketException) as exc:
            raise TransientError(f"cannot connect to ComfyUI at {self.url}: {exc}") from exc
        try:
            try:
                r = requests.post(self.url + "/prompt", json={"prompt": prompt, "client_id": client}, timeout=30)
            except requests.RequestException as exc:
                raise TransientError(f"ComfyUI at {self.url} did not take the prompt: {exc}") from exc
            if r.status_code == 400:
                body = r.json()
                raise InputError(f"ComfyUI rejected the chunk prompt: {json.dumps(body)[:1500]}", body)
            if r.status_code != 200:
                raise TransientError(f"ComfyUI answered {r.status_code} to /prompt: {r.text[:500]}")
            pid = r.json()["prompt_id"]
            started = self._follow(ws, pid, t0, timeout_s)
        finally:
            ws.close()
        entry = self._history(pid)
        items = entry.get("outputs", {}).get(SAVE_NODE, {})
        files_out = [str(self.base / i.get("type", "output") / i.get("subfolder", "") / i["filename"])
                     for i in items.get("images", [])]
        if not files_out:
            raise InputError(f"chunk prompt {pid} finished without a saved video (history: "
                             f"{json.dumps(entry.get('status', {}))[:500]})")
        info = (items.get("swapline_video") or [{}])[0]
        return {"outputs": files_out, "seconds": time.time() - t0, "prompt_id": pid, "frames": info.get("frames"),
                "stage_seconds": stage_seconds(prompt, started)}

    def _follow(self, ws, pid: str, t0: float, timeout_s: float) -> list[tuple[str | None, float]]:
        """Wait for the prompt to finish; returns ComfyUI's "executing" events as (node id, time):
        a node runs from its event to the next one (None: the prompt ended)."""
        deadline = t0 + timeout_s
        started: list[tuple[str | None, float]] = []
        ws.settimeout(1.0)
        while True:
            if time.time() > deadline:
                self._abort(pid)
                raise ChunkTimeout(f"chunk prompt {pid} ran past its {timeout_s:g}s limit; interrupted")
            if not self.alive():
                raise TransientError(f"ComfyUI (pid {self.proc.pid if self.proc else None}) died while running "
                                     f"prompt {pid}")
            try:
                raw = ws.recv()
            except websocket.WebSocketTimeoutException:
                continue
            except (OSError, websocket.WebSocketException) as exc:
                raise TransientError(f"lost the connection to ComfyUI while running prompt {pid}: {exc}") from exc
            if not isinstance(raw, str):
                continue
            msg = json.loads(raw)
            data = msg.get("data", {})
            if data.get("prompt_id") != pid:
                continue
            kind = msg.get("type")
            if kind == "execution_start":
                deadline = time.time() + timeout_s   # time spent queued behind another chunk does not count
            elif kind == "execution_error":
                raise classify_execution_error(data)
            elif kind == "execution_interrupted":
                raise TransientError(f"prompt {pid} was interrupted on the worker")
            elif kind == "executing":
                started.append((data.get("node"), time.time()))
                if data.get("node") is None:
                    return started

    def _abort(self, pid: str) -> None:
        try:
            requests.post(self.url + "/queue", json={"delete": [pid]}, timeout=5)
            requests.post(self.url + "/interrupt", timeout=5)
        except requests.RequestException:
            pass

    def _history(self, pid: str, wait: float = 30.0) -> dict:
        deadline = time.time() + wait
        while True:
            try:
                r = requests.get(f"{self.url}/history/{pid}", timeout=30)
                r.raise_for_status()
                entry = r.json().get(pid)
            except (requests.RequestException, ValueError) as exc:
                raise TransientError(f"cannot read ComfyUI's history for prompt {pid}: {exc}") from exc
            if entry or time.time() > deadline:
                return entry or {}
            time.sleep(0.2)


def stage_seconds(prompt: dict, started: list[tuple[str | None, float]]) -> dict[str, float]:
    """Seconds per stage of one chunk from the "executing" events, a stage being the node's class
    (SwaplineTrackFaces, SwaplineSwap...; a class used twice adds up). Nodes ComfyUI served from
    its cache send no event and take no time, so they are absent."""
    out: dict[str, float] = {}
    for (node, at), (_, end) in zip(started, started[1:]):
        if node is None:
            continue
        stage = str((prompt.get(str(node)) or {}).get("class_type") or node)
        out[stage] = out.get(stage, 0.0) + max(0.0, end - at)
    return out


def _publish(publish, outputs: list[str]) -> list[str]:
    """Put the chunk's file into the chunk store from the worker's machine (the store is shared)."""
    store, key = publish
    return [store.publish(key, Path(outputs[0]))]


@ray.remote(max_concurrency=8)
class ComfyWorker:
    """One ComfyUI process. Threaded: health() answers while run_chunk() waits on ComfyUI."""

    def __init__(self, comfy_path: str, port: int = 0, extra_args=(), base_dir: str | None = None,
                 pack: str | None = None, models_dir: str | None = None, name: str | None = None,
                 startup_timeout: float = 180.0, watch_interval: float = 1.0):
        gpus = ray.get_gpu_ids() if ray.is_initialized() else []
        self.name = name or f"worker-{port or os.getpid()}"
        self.proc = ComfyProcess(comfy_path, port, base_dir, extra_args, pack, models_dir, cpu=not gpus,
                                 gpu_ids=gpus)
        self.startup_timeout = startup_timeout
        self.restarts = 0
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._stopping = False
        self._start()
        self._watch = threading.Thread(target=self._watchdog, args=(watch_interval,), daemon=True)
        self._watch.start()

    def _start(self) -> None:
        self._ready.clear()
        self.proc.start(self.startup_timeout)
        self._ready.set()

    def _watchdog(self, interval: float) -> None:
        while not self._stopping:
            time.sleep(interval)
            if self._stopping or self.proc.alive() or not self._ready.is_set():
                continue
            self.restart()

    def restart(self) -> None:
        with self._lock:
            self._ready.clear()
            self.proc.kill()
            for attempt in range(3):
                try:
                    self.proc.start(self.startup_timeout)
                    break
                except TransientError:
                    if attempt == 2:
                        raise
            self.restarts += 1
            self._ready.set()

    def health(self) -> dict:
        return {"name": self.name, "restarts": self.restarts, "ready": self._ready.is_set(), **self.proc.health()}

    def run_chunk(self, prompt: dict, timeout_s: float, files: dict | None = None, publish=None) -> dict:
        deadline = time.time() + self.startup_timeout
        while not (self._ready.is_set() and self.proc.alive()):     # dead: the watchdog is restarting it
            if time.time() > deadline:
                raise TransientError(f"{self.name}: ComfyUI is not up (restarting)")
            time.sleep(0.2)
        out = self.proc.run(prompt, timeout_s, files)
        out["worker"] = self.name
        if publish is not None:
            out["stored"] = _publish(publish, out["outputs"])
        return out

    def log_tail(self, n: int = 60) -> str:
        return self.proc.log_tail(n)

    def stop(self) -> None:
        self._stopping = True
        self.proc.stop()
