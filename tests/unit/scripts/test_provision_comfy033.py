"""scripts/provision_comfy033.py: where the tests' ComfyUI 0.33.0 comes from, and what a machine
with none of its sources is told (the demo never needs it; CI must fail rather than skip)."""
from __future__ import annotations

import importlib.util
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
UNREACHABLE = "http://127.0.0.1:9/comfyui.tar.gz"   # the discard port: refused at once


@pytest.fixture
def prov(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_file_location("provision_comfy033", REPO / "scripts" / "provision_comfy033.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    # a clone with nothing beside it
    monkeypatch.setattr(mod, "REPO", tmp_path / "bare" / "clone")
    monkeypatch.delenv("SWAPLINE_SHARED", raising=False)
    monkeypatch.setattr(mod, "ARCHIVE_URL", UNREACHABLE)
    return mod


def test_no_source_names_every_place_tried_and_the_fix(prov, tmp_path, capsys):
    rc = prov.main([str(tmp_path / "ComfyUI-0.33")])
    err = capsys.readouterr().err
    assert rc == 1
    assert str(tmp_path / "bare" / "shared" / "comfyui-0.33" / prov.TARBALL) + ": not found" in err
    assert UNREACHABLE in err
    assert "SWAPLINE_SHARED" in err and "SWAPLINE_TEST_COMFY=0.3.75" in err
    assert "scripts/demo.sh does not need ComfyUI 0.33" in err
    assert not (tmp_path / "ComfyUI-0.33" / "main.py").exists()


def test_a_tarball_with_the_wrong_hash_is_refused(prov, tmp_path, monkeypatch):
    shared = tmp_path / "elsewhere"
    (shared / "comfyui-0.33").mkdir(parents=True)
    with tarfile.open(shared / "comfyui-0.33" / prov.TARBALL, "w:xz") as t:
        t.add(REPO / "LICENSE", arcname="ComfyUI/LICENSE")
    monkeypatch.setenv("SWAPLINE_SHARED", str(shared))
    done, tried = prov.provision(tmp_path / "ComfyUI-0.33", url=UNREACHABLE, timeout=5)
    assert not done
    assert any("expected " + prov.TARBALL_SHA256 in line for line in tried), tried


def test_the_shared_tarball_provisions_and_keeps_user_data(prov, tmp_path, monkeypatch):
    # the real tarball CI and developers have beside the repo (a hard requirement of the test run)
    real = REPO.parent / "shared"
    assert (real / "comfyui-0.33" / prov.TARBALL).is_file(), f"{real}/comfyui-0.33/{prov.TARBALL} missing"
    monkeypatch.setenv("SWAPLINE_SHARED", str(real))
    target = tmp_path / "ComfyUI-0.33"
    (target / "custom_nodes").mkdir(parents=True)
    (target / "custom_nodes" / "mine.txt").write_text("kept")
    (target / "stale.py").write_text("replaced")
    done, _ = prov.provision(target)
    assert done
    assert '"0.33.0"' in (target / "comfyui_version.py").read_text()
    assert (target / "custom_nodes" / "mine.txt").read_text() == "kept"
    assert not (target / "stale.py").exists()
    assert prov.provision(target, url=UNREACHABLE) == (True, [])   # stamped: nothing to do
