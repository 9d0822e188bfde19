"""One ComfyUI worker per GPU (issue 33 item 4), on a CPU machine through the same code path: a Ray
cluster that declares two GPUs, the Coordinator starting its workers with one GPU each (its default
when the cluster has GPUs), and stand-in ComfyUIs that report the environment and arguments they
were started with. Each sees exactly its own GPU (CUDA_VISIBLE_DEVICES), none runs with --cpu; a
worker without a GPU runs with --cpu and sees no GPU at all.

Ray runs in a child process: the session's cluster (conftest.py) declares no GPUs and must not."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from farm_helpers import FARM, REPO

# ComfyUI's stand-in: answers what the worker asks (/system_stats with its argv, /queue) and
# writes its CUDA_VISIBLE_DEVICES and argv beside its base directory.
FAKE_MAIN = """\
import json, os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
port = int(sys.argv[sys.argv.index("--port") + 1])
base = sys.argv[sys.argv.index("--base-directory") + 1]
with open(base + ".info.json", "w") as f:
    json.dump({"cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "argv": sys.argv}, f)

class H(BaseHTTPRequestHandler):
    def do_GET(self):
        body = {"system": {"argv": sys.argv}} if self.path.startswith("/system_stats") else \\
            {"queue_running": [], "queue_pending": []}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass

HTTPServer(("127.0.0.1", port), H).serve_forever()
"""

DRIVER = """\
import json, sys
from pathlib import Path
import ray
from swapline_farm.coordinator import Coordinator
from swapline_farm.ledger import DeadLetterLedger, JobLedger
from swapline_farm.store import ChunkStore
from swapline_farm.worker import ComfyWorker

comfy, root = sys.argv[1], Path(sys.argv[2])
ray.init(num_cpus=3, num_gpus=2, include_dashboard=False, log_to_driver=False)
coord = Coordinator(ChunkStore(str(root / "chunks")), JobLedger(root / "jobs.jsonl"),
                    DeadLetterLedger(root / "dead.jsonl"), None, workers=2, comfy_path=comfy,
                    work_dir=str(root / "farm"), qa={"enabled": False})
health = coord.worker_health()
cpu = ComfyWorker.options(num_cpus=1, num_gpus=0).remote(comfy, 0, [], str(root / "cpu"), None, None, "cpu")
health.append(ray.get(cpu.health.remote()))
infos = {h["name"]: json.loads(Path(h["base_dir"] + ".info.json").read_text()) for h in health}
print("RESULT " + json.dumps({"health": health, "infos": infos}))
ray.get(cpu.stop.remote())
coord.shutdown()
ray.shutdown()
"""


def test_one_worker_per_gpu_each_seeing_only_its_own(tmp_path):
    comfy = tmp_path / "ComfyUI"
    comfy.mkdir()
    (comfy / "main.py").write_text(FAKE_MAIN)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(FARM), str(REPO), os.environ.get("PYTHONPATH", "")]))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    r = subprocess.run([sys.executable, "-c", DRIVER, str(comfy), str(tmp_path / "run")], env=env,
                       capture_output=True, text=True, timeout=300)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, f"exit {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    got = json.loads(line[len("RESULT "):])
    health = {h["name"]: h for h in got["health"]}
    infos = got["infos"]
    assert set(health) == {"w0", "w1", "cpu"} and all(h["ok"] for h in health.values()), health
    gpu_sets = [health[w]["gpus"] for w in ("w0", "w1")]
    assert sorted(g for gs in gpu_sets for g in gs) == ["0", "1"] and all(len(gs) == 1 for gs in gpu_sets)
    for w in ("w0", "w1"):
        assert infos[w]["cuda"] == health[w]["gpus"][0], (w, infos[w])
        assert "--cpu" not in infos[w]["argv"], infos[w]["argv"]
    assert infos["w0"]["cuda"] != infos["w1"]["cuda"]
    assert health["cpu"]["gpus"] == [] and infos["cpu"]["cuda"] == "" and "--cpu" in infos["cpu"]["argv"]
