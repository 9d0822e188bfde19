"""`requires-comfyui` as the ComfyUI frontend reads it.

The frontend checks the field with npm's `semver.satisfies(current, range)`, which rejects a
comma-separated range on every version, so a comma flags the pack as a version conflict
everywhere. nodesemver is a port of npm's semver (same grammar), so this parses the field the way
the frontend does.
"""
from __future__ import annotations

from pathlib import Path

import nodesemver
import pytest
import tomllib

REPO = Path(__file__).resolve().parents[2]


def requires_comfyui() -> str:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["comfy"]["requires-comfyui"]


@pytest.mark.parametrize("version", ["0.3.75", "0.33.0", "0.46.0"])
def test_supported_versions_satisfy_the_field(version):
    # 0.3.75 and 0.33.0 are tested by scripts/test.sh; 0.46.0 (2026-11-18) is checked from code
    # (docs/compatibility.md) and must not be shut out by an upper bound
    assert nodesemver.satisfies(version, requires_comfyui()), (version, requires_comfyui())


def test_older_versions_are_refused():
    assert not nodesemver.satisfies("0.3.74", requires_comfyui())


def test_the_parser_rejects_a_comma_as_the_frontend_does():
    # why the field may not use the pip-style form: the check would fail on every version
    assert not nodesemver.satisfies("0.33.0", ">=0.3.75,<0.34.0")
    assert "," not in requires_comfyui()
