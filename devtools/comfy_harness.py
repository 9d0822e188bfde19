"""A real ComfyUI server for tests: started as `main.py --cpu` with our pack in custom_nodes.

Each server gets an isolated base directory (its own custom_nodes, input, output, user), an
in-memory database and an extra-model-paths file pointing at a test models folder. Prompts are
queued over HTTP and followed over the WebSocket, exactly as a studio's queue client would.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import uuid
from pathlib import Path

import requests
import websocket

REPO = Path(__file__).resolve().parent.parent


def comfy_tree() -> Path:
    """The ComfyUI the tests run against: $SWAPLINE_COMFYUI (a ComfyUI folder, e.g.
    .comfy/ComfyUI-0.33; relative paths are taken from the repo root), else .comfy/ComfyUI (0.3.75).
    The server runs with this test process's Python, so point pytest's interpreter at the venv
    that holds that ComfyUI's requirements (scripts/test.sh does: .venv-0.33 for 0.33)."""
    env = os.environ.get("SWAPLINE_COMFYUI", "").strip()
    tree = (REPO / env).resolve() if env else REPO / ".comfy" / "ComfyUI"
    if not (tree / "main.py").is_file() or not (tree / "comfyui_version.py").is_file():
        raise RuntimeError(f"SWAPLINE_COMFYUI={env!r}: {tree} is not a ComfyUI folder (no main.py / "
                           "comfyui_version.py); run scripts/setup.sh or point it at a ComfyUI checkout")
    return tree


COMFY = comfy_tree()


class ComfyExecutionError(AssertionError):
    """A node failed inside ComfyUI; the message is the node's own exception text."""

    def __init__(self, data: dict):
        self.data = data
        self.node_type = data.get("node_type")
        self.exception_message = data.get("exception_message", "")
        super().__init__(f"{self.node_type} (node {data.get('node_id')}) failed: "
                         f"{data.get('exception_type')}: {self.exception_message}")


class PromptRejected(AssertionError):
    def __init__(self, body: dict):
        self.body = body
        super().__init__(f"prompt rejected by validation: {json.dumps(body)[:2000]}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ComfyServer:
    def __init__(self, base_dir: Path, models_dir: Path, extra_args: tuple[str, ...] = (),
                 comfy_dir: Path = COMFY, link_pack: bool = True, device: str = "cpu"):
        self.comfy_dir = Path(comfy_dir)
        self.link_pack = link_pack
        self.device = device          # "cpu" (--cpu, the tests) or "gpu" (ComfyUI picks the GPU: bench/gpu_check)
        self.base_dir = Path(base_dir)
        self.models_dir = Path(models_dir)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = self.base_dir / "comfyui.log"
        self.extra_args = extra_args
        self.proc: subprocess.Popen | None = None
        self.client_id = uuid.uuid4().hex

    # -- lifecycle ---------------------------------------------------------------------------
    def prepare_dirs(self) -> None:
        for sub in ("custom_nodes", "input", "output", "user/default", "models"):
            (self.base_dir / sub).mkdir(parents=True, exist_ok=True)
        link = self.base_dir / "custom_nodes" / "swapline"
        if self.link_pack and not link.exists():
            link.symlink_to(REPO, target_is_directory=True)
        settings = self.base_dir / "user" / "default" / "comfy.settings.json"
        if not settings.exists():
            settings.write_text(json.dumps({"Comfy.TutorialCompleted": True}))
        folders = {"insightface": "insightface", "facerestore_models": "facerestore_models",
                   "swapline_faces": "swapline/faces", "facemask": "facemask", "checkpoints": "checkpoints",
                   "vae": "vae", "controlnet": "controlnet", "hyperswap": "hyperswap", "reswapper": "reswapper",
                   "facefusion": "facefusion", "swapline_safety": "swapline_safety"}
        lines = ["swapline_tests:", f"    base_path: {self.models_dir}"]
        lines += [f"    {k}: {v}" for k, v in folders.items()]
        (self.base_dir / "extra_model_paths.yaml").write_text("\n".join(lines) + "\n")

    def start(self, timeout: float = 120.0) -> ComfyServer:
        self.prepare_dirs()
        cpu = ["--cpu"] if self.device == "cpu" else []
        cmd = [sys.executable, "main.py", *cpu, "--listen", "127.0.0.1", "--port", str(self.port),
               "--disable-auto-launch", "--base-directory", str(self.base_dir),
               "--database-url", "sqlite:///:memory:",
               "--extra-model-paths-config", str(self.base_dir / "extra_model_paths.yaml"), *self.extra_args]
        log = open(self.log_path, "ab")
        env = dict(os.environ, PYTHONUNBUFFERED="1", DO_NOT_TRACK="1")
        self.proc = subprocess.Popen(cmd, cwd=self.comfy_dir, stdout=log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ComfyUI exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                r = requests.get(self.url + "/system_stats", timeout=2)
                # free_port() releases the port before ComfyUI binds it: on a shared machine another
                # test's server can take it first and would answer here. Ours names its base dir.
                if r.ok and str(self.base_dir) in r.json().get("system", {}).get("argv", []):
                    break
            except (requests.RequestException, ValueError):
                pass
            time.sleep(0.5)
        else:
            self.stop()
            raise RuntimeError(f"ComfyUI did not become ready in {timeout}s:\n{self.log_tail()}")
        self.assert_clean_import()
        return self

    def assert_clean_import(self) -> None:
        bad = [line for line in self.log().splitlines()
               if "IMPORT FAILED" in line or ("[Swapline]" in line and "disabled" in line)]
        if bad:
            raise AssertionError("custom node import failed:\n" + "\n".join(bad) + "\n" + self.log_tail(200))

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)

    def kill(self) -> None:
        """Simulate a crash: SIGKILL, no cleanup."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, n: int = 80) -> str:
        return "\n".join(self.log().splitlines()[-n:])

    # -- API ---------------------------------------------------------------------------------
    def object_info(self, node: str | None = None) -> dict:
        r = requests.get(self.url + "/object_info" + (f"/{node}" if node else ""), timeout=30)
        r.raise_for_status()
        return r.json()

    def queue(self, prompt: dict, extra_data: dict | None = None) -> str:
        body = {"prompt": prompt, "client_id": self.client_id}
        if extra_data:
            body["extra_data"] = extra_data
        r = requests.post(self.url + "/prompt", json=body, timeout=30)
        if r.status_code != 200:
            raise PromptRejected(r.json())
        return r.json()["prompt_id"]

    def interrupt(self) -> None:
        requests.post(self.url + "/interrupt", timeout=10)

    def connect(self) -> websocket.WebSocket:
        ws = websocket.WebSocket()
        ws.connect(f"ws://127.0.0.1:{self.port}/ws?clientId={self.client_id}", timeout=600)
        return ws

    def follow(self, ws: websocket.WebSocket, prompt_id: str, timeout: float = 900.0,
               on_message=None) -> list[dict]:
        """Read WebSocket events until the prompt finishes; raise the node's own error."""
        events, deadline = [], time.time() + timeout
        while time.time() < deadline:
            raw = ws.recv()
            if not isinstance(raw, str):
                continue  # binary preview frames
            msg = json.loads(raw)
            data = msg.get("data", {})
            if data.get("prompt_id") not in (None, prompt_id):
                continue
            events.append(msg)
            if on_message:
                on_message(msg)
            kind = msg.get("type")
            if kind == "execution_error":
                raise ComfyExecutionError(data)
            if kind == "execution_interrupted":
                return events
            # "executing" with node None comes after the history entry is stored (execution_success
            # comes before it), so only that one means /history is complete.
            if kind == "executing" and data.get("node") is None and data.get("prompt_id") == prompt_id:
                return events
        raise TimeoutError(f"prompt {prompt_id} did not finish in {timeout}s")

    def history(self, prompt_id: str, wait: float = 30.0) -> dict:
        deadline = time.time() + wait
        while True:
            r = requests.get(f"{self.url}/history/{prompt_id}", timeout=30)
            r.raise_for_status()
            entry = r.json().get(prompt_id)
            if entry or time.time() > deadline:
                return entry or {}
            time.sleep(0.2)

    def run(self, prompt: dict, timeout: float = 900.0) -> dict:
        """Queue a prompt, follow it to the end, return its history entry (outputs per node)."""
        ws = self.connect()
        try:
            pid = self.queue(prompt)
            events = self.follow(ws, pid, timeout)
        finally:
            ws.close()
        hist = self.history(pid)
        hist["_events"] = events
        hist["_prompt_id"] = pid
        return hist

    def output_path(self, item: dict) -> Path:
        return self.base_dir / item.get("type", "output") / item.get("subfolder", "") / item["filename"]

    def view(self, item: dict) -> bytes:
        q = urllib.parse.urlencode({k: item.get(k, "") for k in ("filename", "subfolder", "type")})
        r = requests.get(f"{self.url}/view?{q}", timeout=60)
        r.raise_for_status()
        return r.content
