"""comfy-test's registration and validation levels against the suite's own ComfyUI server.

comfy-test (requirements-test.txt; MIT) is the install-testing tool ComfyUI node authors use. In
attach mode, ``comfy-test run --server-url URL``, it builds and starts nothing: its CI boots a
server with the pack in custom_nodes and runs it from the pack's folder there, with the server's
startup log in ``$COMFY_TEST_LOGS_DIR/server.log``. Here the server is the session's (`staged`:
stand-in models under the real file names, the workflows' input files), and the levels those of
comfy-test.toml up to VALIDATION:

- SYNTAX, its static scan (tests/unit/test_comfy_test_static.py also runs it on a clean copy);
- INSTALL, attach form: nothing installed, ComfyUI's folders derived from the working folder (our
  pack is a symlink in the server's custom_nodes, so it derives the repository's parents; only its
  version note reads them, and REGISTRATION replaces that with the server's own report);
- REGISTRATION: the server answers, its log holds no custom-node import failure ("Cannot import
  ... module for custom nodes", "IMPORT FAILED"), /object_info lists the registered nodes;
- VALIDATION: every workflows/*.json (UI format) against /object_info: node types exist; widget
  values have their input's type and lie in its range or options ("schema"); links join an
  output to an input of its type ("graph"); node definitions are well-formed ("introspection").

VALIDATION's schema check in comfy-test 0.4.15 misreads ``widgets_values`` on most nodes of these
workflows, ComfyUI's own included: it takes a ``"COMBO"`` input (how /object_info lists V3 combos,
the only kind Swapline declares) and a dynamic combo for a socket and skips it, and it does not
skip the value slot after a seed-like INT (``control_after_generate``, KSampler's seed), so every
later value is checked against the wrong input; and it checks the empty slot the editor keeps for
a widget turned into a linked input as if it were the value. So it reports "'start': expected
INT, got non-numeric string 'swapline_sample_clip.mp4'" and the like, and fails. Until it reads
them as the editor does, :func:`test_validation_level` requires what it can: its graph and
introspection checks clean, and its value rules clean on the values paired as the editor pairs
them (``scripts/workflow_format.ui_to_api``, which test_workflows.py holds to the API twins). When
comfy-test passes VALIDATION, the test requires that instead.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
from workflow_format import DYNAMIC_COMBO, is_widget, ui_to_api, widget_inputs  # noqa: E402

WORKFLOWS = sorted((REPO / "workflows").glob("*.json"))


@pytest.fixture(scope="module")
def run(staged, tmp_path_factory):
    """One ``comfy-test run --server-url <the session's server> --level validation``: its output."""
    assert importlib.util.find_spec("comfy_test") is not None, (
        "comfy-test is not installed: pip install -r requirements-test.txt (scripts/setup.sh --tests does)")
    tmp = tmp_path_factory.mktemp("comfy-test")
    logs, home, scratch = tmp / "logs", tmp / "home", tmp / "tmp"
    for d in (logs, home, scratch):
        d.mkdir()
    (logs / "server.log").symlink_to(staged.log_path)        # where attach mode reads the startup log
    # HOME: comfy-test reads ~/.comfy-test/settings.env (it can hide workflows); TMPDIR: its scratch
    env = dict(os.environ, COMFY_TEST_LOGS_DIR=str(logs), HOME=str(home), TMPDIR=str(scratch))
    env.pop("COMFY_TEST_CUDA", None)
    r = subprocess.run([sys.executable, "-m", "comfy_test", "run", "--server-url", staged.url, "--level", "validation"],
                       cwd=staged.base_dir / "custom_nodes" / "swapline", env=env, capture_output=True, text=True,
                       timeout=600)
    out = r.stdout + r.stderr
    assert "Levels: syntax, install, registration, validation" in out, out[-8000:]
    return r.returncode, out, logs


def test_registration_level_passes(run, staged):
    _rc, out, logs = run
    for level in ("SYNTAX", "INSTALL", "REGISTRATION"):
        assert f"[{level}] PASSED" in out, f"{level} did not pass:\n{out[-8000:]}"
    # it read our server's log (not "log: unavailable", which skips the import check) ...
    assert f"(log: {logs / 'server.log'})" in out and "No import errors detected" in out, out[-8000:]
    # ... and saw every node the server lists, ours included
    info = staged.object_info()
    found = re.search(r"Found (\d+) registered nodes", out)
    assert found and int(found.group(1)) == len(info), out[-8000:]
    assert sum(name.startswith("Swapline") for name in info) >= 20


def test_validation_level(run, staged):
    rc, out, _logs = run
    names = [p.name for p in WORKFLOWS]
    assert f"Validating {len(names)} workflow(s)" in out, out[-8000:]       # not "No workflows to validate"
    if "[VALIDATION] PASSED" in out:
        assert rc == 0, out[-8000:]
        for name in names:
            assert re.search(rf"Validating {re.escape(name)}\n\s+OK\n", out), f"{name}:\n{out[-8000:]}"
        return
    # comfy-test 0.4.15: only its schema check may fail (module docstring); prove it is the pairing
    assert "Workflow validation failed" in out, out[-8000:]
    details = out[out.index("Workflow validation failed"):]
    assert "[graph]" not in details and "[introspection]" not in details, details[:8000]
    from comfy_test.comfyui.validator import WorkflowValidation

    info = staged.object_info()
    validator = WorkflowValidation(info)
    problems = []
    for path in WORKFLOWS:
        ui = json.loads(path.read_text())
        found = validator.validate(ui)
        problems += [f"{path.name}: {e}" for e in found.errors if e.level != "schema"]
        problems += [f"{path.name}: {e}" for e in schema_errors(validator, ui, info)]
    assert not problems, "\n".join(problems)


def schema_errors(validator, ui: dict, info: dict) -> list[str]:
    """comfy-test's value rules (type, range, options) on each widget value, paired with its input
    as the editor pairs them (ui_to_api): what its schema check reports once the pairing is right."""
    errors = []
    for node_id, node in ui_to_api(ui, info).items():
        defn = info[node["class_type"]]
        for name, spec, _optional in widget_inputs(defn):
            value = node["inputs"].get(name)
            if name not in node["inputs"] or not is_widget(spec) or isinstance(value, list):
                continue                        # not set (the default applies), or a link
            opts = spec[1] if len(spec) > 1 and isinstance(spec[1], dict) else {}
            kind = spec[0]
            if kind == "COMBO":
                kind = list(opts.get("options", []))
            elif kind == DYNAMIC_COMBO:
                kind = [o["key"] for o in opts.get("options", [])]
            error = validator._validate_value(name, kind, [kind, opts], value)
            if error:
                errors.append(f"Node {node_id} ({node['class_type']}): {error}")
    return errors
