"""Checks CI runs before the tests: `comfy node validate` must pass with no warnings, the registry
archive `comfy node pack` makes holds exactly what a user needs (see .comfyignore) and stays small,
and the shipped workflows keep the production safety defaults (signing fails closed)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


# Widget values every shipped workflow must keep on these nodes: a signed output that cannot be
# signed fails the job (issue 16) instead of shipping an unsigned file as if it were signed.
SAFE_DEFAULTS = {"SwaplineC2PASink": {"on_signing_failure": "fail"}}


def check_workflows(folder: Path = REPO / "workflows") -> list[str]:
    """Problems in the shipped workflows (API twins by input name, UI files by widget value)."""
    problems = []
    for path in sorted(folder.glob("api/*.json")):
        for node_id, node in json.loads(path.read_text()).items():
            for name, want in SAFE_DEFAULTS.get(node.get("class_type"), {}).items():
                if node.get("inputs", {}).get(name) != want:
                    problems.append(f"{path.relative_to(folder.parent)} node {node_id}: {name} must be {want!r}, "
                                    f"is {node.get('inputs', {}).get(name)!r}")
    for path in sorted(folder.glob("*.json")):
        for node in json.loads(path.read_text()).get("nodes", []):
            for _name, want in SAFE_DEFAULTS.get(node.get("type"), {}).items():
                if want not in (node.get("widgets_values") or []):
                    problems.append(f"{path.relative_to(folder.parent)} node {node.get('id')}: {node.get('type')} "
                                    f"does not set {want!r}")
    return problems


# The registry archive: what ComfyUI needs to load and run the pack, and none of the tooling.
ARCHIVE_MUST_HOLD = ("__init__.py", "install.py", "requirements.txt", "pyproject.toml", "LICENSE", "README.md",
                     "nodes/__init__.py", "swapline_core/__init__.py", "web/js/swapline.js", "web/js/qa_gate_legacy.js",
                     "workflows/video_swap_builtin.json", "workflows/api/video_swap_builtin.json",
                     "models/mediapipe/face_landmark.tflite", "models/mediapipe/LICENSE")
ARCHIVE_MUST_NOT_HOLD = ("tests/", "bench/", "calibration/", "devtools/", "scripts/", "farm/", "locks/", ".ci/", "out/",
                         "comfy-test.toml", ".venv", ".comfy/", "__pycache__/", ".pytest_cache/")
ARCHIVE_MAX_BYTES = 10 * 1024 * 1024


def comfy_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    comfy = Path(sys.executable).parent / "comfy"
    with tempfile.TemporaryDirectory() as home:  # comfy-cli writes config under HOME
        env = dict(os.environ, HOME=home, DO_NOT_TRACK="1")
        return subprocess.run([str(comfy), "--skip-prompt", "--no-enable-telemetry", *args],
                              cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def pack(repo: Path, dest: Path) -> Path:
    """`comfy node pack` in `repo` (git-tracked files minus .comfyignore), archive moved to `dest`."""
    r = comfy_cli(["node", "pack"], repo)
    made = repo / "node.zip"
    if r.returncode != 0 or not made.is_file():
        raise RuntimeError("comfy node pack failed:\n" + r.stdout + r.stderr)
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(made, dest)
    return dest


def archive_problems(archive: Path) -> list[str]:
    names = zipfile.ZipFile(archive).namelist()
    problems = [f"{archive.name} lacks {n}" for n in ARCHIVE_MUST_HOLD if n not in names]
    problems += [f"{archive.name} holds {n} (tooling, not the pack: add it to .comfyignore)" for n in names
                 if any(n.startswith(bad) or f"/{bad}" in n for bad in ARCHIVE_MUST_NOT_HOLD) or n.endswith(".pyc")]
    size = archive.stat().st_size
    if size > ARCHIVE_MAX_BYTES:
        problems.append(f"{archive.name} is {size / 2**20:.1f} MiB, over {ARCHIVE_MAX_BYTES // 2**20} MiB")
    return problems


def main() -> int:
    problems = check_workflows()
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    r = comfy_cli(["node", "validate"], REPO)
    text = r.stdout + r.stderr
    print(text.strip())
    if r.returncode != 0 or "warning" in text.lower() or "error" in text.lower():
        print("comfy node validate reported problems", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        archive = pack(REPO, Path(tmp) / "swapline.zip")
        problems = archive_problems(archive)
        count, size = len(zipfile.ZipFile(archive).namelist()), archive.stat().st_size
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    print(f"comfy node pack: {count} files, {size / 2**20:.2f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
