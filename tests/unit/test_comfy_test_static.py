"""comfy-test's static levels pass on the repository, and every Python file stays ASCII.

comfy-test (requirements-test.txt; MIT) is the install-testing tool ComfyUI node authors use; its
CI runs it on a fresh checkout of the repository. Its static levels, which ``comfy-test lint``
runs with no server:

- SYNTAX (its first level, also run by ``comfy-test run``): a pyproject.toml or requirements.txt;
  every ``.py`` file encodable in Windows' cp1252; no hard-coded CUDA device, no autocast, no raw
  ``nn.Conv*d`` / ``nn.ConvTranspose*d`` / ``nn.Linear`` / ``nn.LayerNorm`` / ``nn.GroupNorm`` /
  ``nn.Embedding`` (ComfyUI code builds layers with ``comfy.ops``), on every line but comments
  (docstrings included: a regular expression per line). It scans
  every folder but ``scripts``, ``lib``, ``venv``, ``site-packages``, ``node_modules`` and
  dot-folders, reads no ignore file (not ``.comfyignore``): the torch stand-ins, which never run
  inside ComfyUI, live in ``devtools/lib/`` for that reason (see its docstring);
- JAVASCRIPT: web/ extensions namespaced by the pack's DisplayName, no writes to shared globals.

They run here on a copy of what a checkout holds (git's tracked files plus new ones it does not
ignore), not on the working folder with its virtual environments and caches. The ASCII rule is
stricter than cp1252 on purpose: a dash or a multiplication sign that cp1252 happens to hold
today is one paste away from one it does not, and text a program writes keeps its characters
through escapes (``"\\u2014"``). The registration and validation levels run against a real server
in tests/integration/test_comfy_test_attach.py.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def checkout_files(*pathspec: str) -> list[str]:
    """What a checkout of the working tree would hold: tracked files and new files git does not
    ignore (relative paths), without the ones deleted here."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *pathspec],
                         cwd=REPO, capture_output=True, check=True).stdout.decode()
    return sorted({p for p in out.split("\0") if p and (REPO / p).is_file()})


def test_every_python_file_is_ascii():
    files = checkout_files("*.py")
    assert len(files) > 100, files
    bad = []
    for rel in files:
        for n, line in enumerate((REPO / rel).read_text(encoding="utf-8").splitlines(), 1):
            for col, ch in enumerate(line, 1):
                if ord(ch) > 127:
                    bad.append(f"{rel}:{n}:{col}: {unicodedata.name(ch, hex(ord(ch)))} ({ch!r})")
    assert not bad, ("non-ASCII characters in Python source: write them in ASCII ('x', '->', 'deg', "
                     "'delta E', '-'), or as escapes in text a program outputs:\n" + "\n".join(bad))


def test_comfy_test_static_levels_pass(tmp_path):
    assert importlib.util.find_spec("comfy_test") is not None, (
        "comfy-test is not installed: pip install -r requirements-test.txt (scripts/setup.sh --tests does)")
    pack = tmp_path / "swapline"
    for rel in checkout_files():
        (pack / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / rel, pack / rel)
    home = tmp_path / "home"       # comfy-test reads ~/.comfy-test/settings.env: none here
    home.mkdir()
    r = subprocess.run([sys.executable, "-m", "comfy_test", "lint", str(pack), "--check", "all", "--json"],
                       capture_output=True, text=True, timeout=600, env=dict(os.environ, HOME=str(home)))
    assert r.stdout.lstrip().startswith("{"), f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    report = json.loads(r.stdout)
    assert set(report["results"]) == {"syntax", "javascript"}, report
    assert report["config_warning"] is None, report["config_warning"]     # comfy-test.toml parses
    failed = {name: f"{res['error']}\n{res['details']}" for name, res in report["results"].items() if not res["passed"]}
    assert not failed, "\n\n".join(f"[{name.upper()}] {msg}" for name, msg in failed.items())
    assert r.returncode == 0, r.stderr
