"""The shipped workflows keep the production safety defaults scripts/validate_pack.py enforces."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1].parent
sys.path.insert(0, str(REPO / "scripts"))
import validate_pack  # noqa: E402


def test_every_shipped_sink_fails_closed():
    sinks = [p for p in (REPO / "workflows" / "api").glob("*.json")
             if any(n["class_type"] == "SwaplineC2PASink" for n in json.loads(p.read_text()).values())]
    assert len(sinks) >= 3, sinks                     # the check below must have something to check
    assert validate_pack.check_workflows() == []


def test_a_workflow_that_keeps_unsigned_output_is_reported(tmp_path):
    folder = tmp_path / "workflows"
    shutil.copytree(REPO / "workflows", folder, ignore=shutil.ignore_patterns("*.jpg"))
    api = folder / "api" / "video_swap.json"
    prompt = json.loads(api.read_text())
    sink = next(k for k, v in prompt.items() if v["class_type"] == "SwaplineC2PASink")
    prompt[sink]["inputs"]["on_signing_failure"] = "keep unsigned"
    api.write_text(json.dumps(prompt))
    ui = folder / "video_swap.json"
    graph = json.loads(ui.read_text())
    node = next(n for n in graph["nodes"] if n["type"] == "SwaplineC2PASink")
    node["widgets_values"] = ["keep unsigned" if v == "fail" else v for v in node["widgets_values"]]
    ui.write_text(json.dumps(graph))
    problems = validate_pack.check_workflows(folder)
    assert len(problems) == 2 and all("video_swap.json" in p for p in problems), problems
