"""swapline-farm: submit, status, list, retry, cancel, logs, run.

State lives in a farm folder (--farm-dir, $SWAPLINE_FARM_DIR, default ./swapline-farm): the job
ledger (jobs.jsonl), the dead-letter ledger (dead_letters.jsonl), the chunk store (chunks/) and the
outputs (outputs/). submit/retry/cancel only append to the ledgers, so they work while a `run` is
busy or with none; `run` processes every job the ledger holds as pending (and the manifest given
to it) until the farm is idle. Optional settings come from <farm dir>/farm.yaml (see README).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .errors import FarmError

PENDING = ("submitted", "running")
CONFIG_KEYS = {"comfy_path", "pack", "models_dir", "chunk_frames", "preroll", "max_attempts", "in_flight_per_worker",
               "timeout_factor", "timeout_floor_s", "first_timeout_s", "backoff_base_s", "backoff_max_s",
               "signing", "qa", "webhook_secret", "webhook_secret_env", "webhook_secret_file",
               "price_per_worker_hour", "metrics_port", "metrics_addr", "store", "worker_extra_args"}


class Farm:
    """The farm folder: ledgers, store and config."""

    def __init__(self, root: str):
        from .ledger import DeadLetterLedger, JobLedger

        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.jobs_path, self.dead_path = self.root / "jobs.jsonl", self.root / "dead_letters.jsonl"
        self.ledger = JobLedger(self.jobs_path)
        self.dead_letters = DeadLetterLedger(self.dead_path)
        self.config = self._config()

    def _config(self) -> dict:
        path = self.root / "farm.yaml"
        if not path.exists():
            return {}
        import yaml

        data = yaml.safe_load(path.read_text()) or {}
        unknown = sorted(set(data) - CONFIG_KEYS)
        if unknown:
            raise FarmError(f"{path}: unknown settings {', '.join(unknown)} (known: {', '.join(sorted(CONFIG_KEYS))})")
        return data

    def store(self):
        from .store import ChunkStore

        return ChunkStore(str(self.config.get("store") or self.root / "chunks"))

    def history(self, job_id: str) -> list[dict]:
        rows = []
        if self.jobs_path.exists():
            rows = [json.loads(x) for x in self.jobs_path.read_text().splitlines() if x.strip()]
        return [r for r in rows if r.get("job_id") == job_id]

    def resolve(self, prefix: str) -> str:
        """A job id from its first characters (as `list` shows them)."""
        ids = [j["job_id"] for j in self.ledger.jobs() if j["job_id"].startswith(prefix)]
        if len(ids) != 1:
            raise FarmError(f"job '{prefix}': {'no job' if not ids else f'{len(ids)} jobs'} with that id prefix "
                            "(see `swapline-farm list`)")
        return ids[0]


def webhook_secret(cfg: dict, root: Path | None = None) -> bytes | None:
    """The webhook HMAC secret of a farm.yaml (``webhook_secret_env``, ``webhook_secret_file``
    relative to the farm folder, or inline ``webhook_secret``; see delivery.resolve_secret), else
    $SWAPLINE_FARM_WEBHOOK_SECRET. A named variable or file that is missing is an error, not "unsigned"."""
    from .delivery import resolve_secret

    cfg = dict(cfg)
    if cfg.get("webhook_secret_file") and root is not None:
        cfg["webhook_secret_file"] = str(Path(root) / Path(cfg["webhook_secret_file"]).expanduser())
    try:
        secret = resolve_secret(cfg)
    except ValueError as exc:
        raise FarmError(f"farm.yaml: {exc}") from exc
    env = os.environ.get("SWAPLINE_FARM_WEBHOOK_SECRET")
    return secret or (env.encode() if env else None)


def _checkout_comfy() -> str | None:
    """The ComfyUI scripts/setup.sh provisions beside this checkout (.comfy/ComfyUI), if there is one:
    on a developer machine `swapline-farm run manifest.yaml` then needs no --comfy."""
    path = Path(__file__).resolve().parents[2] / ".comfy" / "ComfyUI"
    return str(path) if (path / "main.py").is_file() else None


def _submit_specs(farm: Farm, specs) -> list[tuple[str, str]]:
    from .coordinator import spec_to_dict
    from .plan import plan_chunks
    from .prompts import build_chunk_prompt, load_workflow

    out = []
    for spec in specs:
        prev = farm.ledger.state(spec.job_id)
        if prev and prev.get("state") in PENDING + ("done", "cancelled"):
            # idempotent: a job is queued once; a cancelled one stays cancelled until `retry`
            out.append((spec.job_id, f"already {prev['state']}"))
            continue
        chunks = plan_chunks(Path(spec.clip), int(farm.config.get("chunk_frames", 32)),
                             int(farm.config.get("preroll", 8)))
        build_chunk_prompt(load_workflow(spec.workflow), spec, chunks[0])    # fail fast on a bad mapping
        farm.ledger.record(spec.job_id, "submitted", spec=spec_to_dict(spec), priority=spec.priority)
        out.append((spec.job_id, "submitted"))
    return out


def cmd_submit(farm: Farm, args) -> int:
    from .jobs import load_manifest

    for jid, what in _submit_specs(farm, load_manifest(args.manifest)):
        print(f"{jid}  {what}")
    return 0


def cmd_status(farm: Farm, args) -> int:
    jid = farm.resolve(args.job)
    state = farm.ledger.state(jid) or {}
    state.pop("spec", None)
    state["dead_letters"] = farm.dead_letters.pending(jid)
    print(json.dumps(state, indent=1, default=str))
    return 0


def cmd_list(farm: Farm, args) -> int:
    for j in farm.ledger.jobs():
        spec = j.get("spec") or {}
        print(f"{j['job_id'][:16]}  {j.get('state', '?'):<10} {spec.get('priority', '?'):<7} {spec.get('clip', '')}")
    return 0


def cmd_retry(farm: Farm, args) -> int:
    jid = farm.resolve(args.job)
    dead = farm.dead_letters.pending(jid)
    for entry in dead:
        farm.dead_letters.mark_retried(jid, entry["chunk_id"])
    farm.ledger.record(jid, "submitted", retried=len(dead))          # queued again for `run`
    print(f"{jid}  re-queued ({len(dead)} dead-lettered chunks); `swapline-farm run` processes it")
    return 0


def cmd_cancel(farm: Farm, args) -> int:
    jid = farm.resolve(args.job)
    farm.ledger.record(jid, "cancelled")
    print(f"{jid}  cancelled")
    return 0


def cmd_logs(farm: Farm, args) -> int:
    jid = farm.resolve(args.job)
    for row in farm.history(jid):
        row = {k: v for k, v in row.items() if k != "spec"}
        print(json.dumps(row, default=str))
    for entry in farm.dead_letters.entries():
        if entry.get("job_id") == jid:
            print(json.dumps(entry, default=str))
    return 0


def cmd_run(farm: Farm, args) -> int:
    import ray

    from .coordinator import Coordinator, spec_from_dict

    cfg = farm.config
    if args.manifest:
        from .jobs import load_manifest

        _submit_specs(farm, load_manifest(args.manifest))
    if args.address:
        ray.init(address=args.address)
    else:
        # "local": a new cluster on this machine, never one another program started; its workers import
        # this farm and the core even when the farm is run from a checkout without `pip install`
        here = Path(__file__).resolve().parents[1]
        path = os.pathsep.join(p for p in (str(here), str(here.parent), os.environ.get("PYTHONPATH", "")) if p)
        ray.init(address="local", num_cpus=max(args.workers, os.cpu_count() or 1), include_dashboard=False,
                 runtime_env={"env_vars": {"PYTHONPATH": path}})
    metrics = None
    if cfg.get("metrics_port") or args.metrics_port:
        from .metrics import FarmMetrics

        metrics = FarmMetrics(price_per_worker_hour=float(cfg.get("price_per_worker_hour", 0.0)))
        metrics.serve(int(args.metrics_port or cfg["metrics_port"]), cfg.get("metrics_addr") or "127.0.0.1")
    comfy = args.comfy or cfg.get("comfy_path") or os.environ.get("SWAPLINE_COMFYUI_PATH") or _checkout_comfy()
    secret = webhook_secret(cfg, farm.root)
    coord = Coordinator(
        farm.store(), farm.ledger, farm.dead_letters, metrics, workers=args.workers,
        max_attempts=int(cfg.get("max_attempts", 3)), comfy_path=comfy, work_dir=str(farm.root),
        out_dir=str(farm.root / "outputs"), pack=cfg.get("pack"), models_dir=cfg.get("models_dir"),
        signing=cfg.get("signing"), qa=cfg.get("qa"),
        webhook_secret=secret,
        worker_extra_args=cfg.get("worker_extra_args", ()),
        **{k: cfg[k] for k in ("chunk_frames", "preroll", "in_flight_per_worker", "timeout_factor",
                               "timeout_floor_s", "first_timeout_s", "backoff_base_s", "backoff_max_s") if k in cfg})
    try:
        for job in farm.ledger.jobs():
            if job.get("state") in PENDING and job.get("spec"):
                coord.submit(spec_from_dict(job["spec"]))
        states = coord.run_until_idle()
    finally:
        coord.shutdown()
        ray.shutdown()
    for jid, state in states.items():
        st = coord.status(jid) or {}
        print(f"{jid}  {state}  {st.get('output') or st.get('error') or ''}")
    return 0 if all(s == "done" for s in states.values()) else 1


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="swapline-farm", description=__doc__.splitlines()[0])
    p.add_argument("--farm-dir", default=os.environ.get("SWAPLINE_FARM_DIR", "swapline-farm"),
                   help="folder for ledgers, chunk store and outputs (default ./swapline-farm)")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("submit", help="queue the jobs of a manifest (YAML/JSON); resubmitting is a no-op")
    s.add_argument("manifest")
    for name, text in (("status", "one job's state and dead letters"), ("retry", "re-inject dead-lettered chunks"),
                       ("cancel", "cancel a job"), ("logs", "a job's ledger history and every failed attempt")):
        sub.add_parser(name, help=text).add_argument("job", help="job id (or its first characters)")
    sub.add_parser("list", help="every job with its state")
    r = sub.add_parser("run", help="run the farm until idle: a local Ray with N ComfyUI workers, or --address")
    r.add_argument("manifest", nargs="?", help="a manifest to submit first")
    r.add_argument("--workers", type=int, default=2, help="ComfyUI workers to start (one per GPU when there are GPUs)")
    r.add_argument("--address", help="join an existing Ray cluster (e.g. ray://head:10001 or 'auto')")
    r.add_argument("--comfy", help="ComfyUI folder on every worker machine (or comfy_path in farm.yaml, "
                   "$SWAPLINE_COMFYUI_PATH; default: this checkout's .comfy/ComfyUI)")
    r.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port")
    return p


COMMANDS = {"submit": cmd_submit, "status": cmd_status, "list": cmd_list, "retry": cmd_retry,
            "cancel": cmd_cancel, "logs": cmd_logs, "run": cmd_run}


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return COMMANDS[args.command](Farm(args.farm_dir), args)
    except FarmError as exc:
        print(f"swapline-farm: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
