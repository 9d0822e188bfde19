"""Registry checks CI runs before the tests: `comfy node validate` must pass with no warnings."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
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
