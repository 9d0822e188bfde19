"""Checks CI runs before the tests: `comfy node validate` must pass with no warnings, and the shipped
workflows keep the production safety defaults (signing fails closed)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
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


def main() -> int:
    problems = check_workflows()
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    comfy = Path(sys.executable).parent / "comfy"
    with tempfile.TemporaryDirectory() as home:  # comfy-cli writes config under HOME
        env = dict(os.environ, HOME=home, DO_NOT_TRACK="1")
        r = subprocess.run([str(comfy), "--skip-prompt", "--no-enable-telemetry", "node", "validate"],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    text = r.stdout + r.stderr
    print(text.strip())
    if r.returncode != 0 or "warning" in text.lower() or "error" in text.lower():
        print("comfy node validate reported problems", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
