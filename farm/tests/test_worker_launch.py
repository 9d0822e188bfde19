"""How a farm worker starts its ComfyUI (worker.spawn_comfy, comfy_launch.py), with a stand-in main.py:
nothing run between fork and exec in the threaded actor (no preexec_fn), ComfyUI in a session of its
own that dies -- with everything it started -- when its actor is SIGKILLed, and lives as long as the
actor does, whichever of the actor's threads started it."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from farm_helpers import FARM
from swapline_farm import worker

# ComfyUI's stand-in: starts a child of its own (as ComfyUI may), says who it is, then waits.
FAKE_MAIN = """\
import json, os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
info = {"pid": os.getpid(), "child": child.pid, "argv": sys.argv, "name": __name__, "path0": sys.path[0],
        "pgid": os.getpgrp(), "sid": os.getsid(0)}
with open(os.environ["SWAPLINE_TEST_INFO"] + ".tmp", "w") as f:
    json.dump(info, f)
os.replace(os.environ["SWAPLINE_TEST_INFO"] + ".tmp", os.environ["SWAPLINE_TEST_INFO"])
time.sleep(600)
"""


def gone(pid: int) -> bool:
    """Exited (a zombie nobody reaped counts: containers' pid 1 may not reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def wait_for(pred, timeout: float) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def fake_comfy(tmp_path: Path) -> tuple[Path, Path]:
    comfy = tmp_path / "ComfyUI"
    comfy.mkdir()
    (comfy / "main.py").write_text(FAKE_MAIN)
    return comfy, tmp_path / "info.json"


def read_info(info: Path, proc: subprocess.Popen | None = None) -> dict:
    wait_for(lambda: info.exists() or (proc is not None and proc.poll() is not None), 30)
    assert proc is None or info.exists() or proc.poll() is None, f"ComfyUI died at start ({proc.returncode})"
    assert info.exists(), "the stand-in ComfyUI never started"
    return json.loads(info.read_text())


def cleanup(*pids: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def test_spawn_passes_no_preexec_fn_and_starts_a_session(monkeypatch):
    seen = {}

    def fake_popen(cmd, **kw):
        seen.update(kw, cmd=cmd)
        return None

    monkeypatch.setattr(worker.subprocess, "Popen", fake_popen)
    worker.spawn_comfy(sys.executable, "/nowhere", ["--port", "1"])
    assert "preexec_fn" not in seen and seen["start_new_session"] is True, seen
    assert seen["cmd"][1:] == [str(worker.LAUNCHER), str(os.getpid()), "main.py", "--port", "1"]


def test_comfy_outlives_the_thread_that_started_it(tmp_path):
    """PR_SET_PDEATHSIG fires when the starting *thread* ends; a threaded actor's ComfyUI must not."""
    comfy, info = fake_comfy(tmp_path)
    env = dict(os.environ, SWAPLINE_TEST_INFO=str(info))
    started = {}
    t = threading.Thread(target=lambda: started.update(
        proc=worker.spawn_comfy(sys.executable, comfy, ["--base-directory", "x"], env=env)))
    t.start()
    t.join()
    proc = started["proc"]
    try:
        got = read_info(info, proc)
        assert got["pid"] == proc.pid, got                       # ComfyUI's own pid, not a wrapper's
        assert got["pgid"] == got["sid"] == proc.pid, got        # a session of its own, which it leads
        assert got["name"] == "__main__" and got["argv"] == ["main.py", "--base-directory", "x"], got
        assert Path(got["path0"]) == comfy.resolve(), got
        time.sleep(1.5)
        assert proc.poll() is None and not gone(got["child"]), "ComfyUI died with the thread that started it"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)


# The actor's stand-in: a process running threads, which starts ComfyUI from one of them.
ACTOR = """\
import os, sys, threading, time
sys.path.insert(0, {farm!r})
from swapline_farm.worker import spawn_comfy

def spin():
    while True:
        time.sleep(0.01)

for _ in range(4):
    threading.Thread(target=spin, daemon=True).start()
threading.Thread(target=lambda: (spawn_comfy(sys.executable, {comfy!r}, []), time.sleep(600))).start()
time.sleep(600)
"""


def test_comfy_and_its_children_die_when_the_actor_is_sigkilled(tmp_path):
    comfy, info = fake_comfy(tmp_path)
    actor = subprocess.Popen([sys.executable, "-c", ACTOR.format(farm=str(FARM), comfy=str(comfy))],
                             env=dict(os.environ, SWAPLINE_TEST_INFO=str(info)))
    got = {}
    try:
        got = read_info(info)
        assert not gone(got["pid"]) and not gone(got["child"])
        actor.kill()
        actor.wait(10)
        assert wait_for(lambda: gone(got["pid"]), 5), "ComfyUI outlived its SIGKILLed actor"
        assert wait_for(lambda: gone(got["child"]), 5), "a process ComfyUI started outlived its SIGKILLed actor"
    finally:
        cleanup(actor.pid, *(got.get(k) for k in ("pid", "child") if got.get(k)))
        actor.wait(10)


def test_launcher_kills_at_once_when_its_parent_is_already_gone(tmp_path):
    comfy, info = fake_comfy(tmp_path)
    # a parent pid that is not ours: the launcher must not run main.py at all
    proc = subprocess.Popen([sys.executable, str(worker.LAUNCHER), "1", "main.py"], cwd=comfy,
                            start_new_session=True, env=dict(os.environ, SWAPLINE_TEST_INFO=str(info)))
    assert proc.wait(10) == -signal.SIGKILL
    assert not info.exists()
