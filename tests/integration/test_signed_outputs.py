"""The C2PA sink through a real ComfyUI: an image swap signed without a QA report still names its
method and models; signing that cannot succeed fails the job and leaves *_UNSIGNED; a required
consent is enforced; a consent recorded by Build Face Model reaches the manifest."""
from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from devtools.comfy_harness import ComfyExecutionError
from devtools.media import SAMPLES

REPO = Path(__file__).resolve().parents[2]
DOC = "cd" * 32


@pytest.fixture(scope="module")
def staged(comfy):
    for name, src in {"swapline_source_face.png": "source_face.png",
                      "swapline_target_reference.png": "target_reference.png"}.items():
        shutil.copy(SAMPLES / src, comfy.base_dir / "input" / name)
    return comfy


def signed_image_swap(prefix: str, **sink) -> dict:
    """workflows/api/image_swap_builtin with its SaveImage replaced by the C2PA sink, on the classical
    path (MTCNN + dlib analyzer, 68-point warp; the shipped workflow runs the mesh path, which
    test_video_pipeline's signed run covers)."""
    p = copy.deepcopy(json.loads((REPO / "workflows" / "api" / "image_swap_builtin.json").read_text()))
    for node in p.values():
        if node["class_type"] == "SwaplineAnalyzerLoader":
            node["inputs"]["pack"] = "builtin (MTCNN + dlib, no download)"
        if node["class_type"] == "SwaplineSwapperLoader":
            node["inputs"]["swapper"] = "builtin classical (landmark warp, no download)"
    save = next(k for k, v in p.items() if v["class_type"] == "SaveImage")
    swap = next(k for k, v in p.items() if v["class_type"] == "SwaplineSwapFaces")
    target = p[swap]["inputs"]["images"]
    build = next(k for k, v in p.items() if v["class_type"] == "SwaplineBuildFaceModel")
    p[save] = {"class_type": "SwaplineC2PASink",
               "inputs": {"images": [swap, 0], "target_images": target, "face_model": [build, 0],
                          "filename_prefix": prefix, "image_format": "png", "crf": 18, "preset": "medium",
                          "audio": False, "attestation": "", "require_trusted_signer": False,
                          "on_signing_failure": "fail", "require_consent": False, **sink}}
    return p


def sink_result(hist: dict) -> dict:
    return next(d["swapline_signing"][0] for d in hist["outputs"].values() if "swapline_signing" in d)


def test_signed_image_swap_without_qa_names_the_classical_method_and_models(staged):
    from swapline_core.provenance.c2pa import verify_media
    from swapline_core.provenance.method import SYNTHETIC_COMPOSITE

    hist = staged.run(signed_image_swap("signed_test/classical"))
    res = sink_result(hist)
    assert res["status"] == "dev certificate" and res["results"][0]["signed"], res
    check = verify_media(staged.base_dir / "output" / res["results"][0]["file"])
    assert check.intact
    edits = [a for a in check.actions if a["action"] == "c2pa.edited"]
    assert [e["digitalSourceType"] for e in edits] == [SYNTHETIC_COMPOSITE]
    stages = {s["stage"]: s for s in check.qa["method"]["stages"]}
    assert stages["swap"]["method"].startswith("classical landmark warp")
    analysis = stages["analysis"]["models"]
    assert analysis and all(len(m["sha256"]) == 64 and m["licence"] for m in analysis), analysis
    assert check.qa["models"] == analysis                # no QA report: the models are still there
    assert check.qa["consent"] is None


def test_unsignable_output_fails_the_job_and_is_kept_as_unsigned(staged):
    from swapline_core.provenance.audit_log import read_audit_log

    cfg = staged.base_dir / "user" / "swapline" / "signing.json"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text('{"cert_chain": "chain.pem", "private_key": ')     # a broken config
    try:
        with pytest.raises(ComfyExecutionError) as e:
            staged.run(signed_image_swap("signed_test/broken"))
    finally:
        cfg.unlink()
    assert "is not valid JSON" in str(e.value) and "_UNSIGNED.png" in str(e.value), e.value
    kept = list((staged.base_dir / "output" / "signed_test").glob("broken*_UNSIGNED.png"))
    assert len(kept) == 1
    log = read_audit_log(staged.base_dir / "output" / "swapline_audit.jsonl")
    last = [r for r in log.records if r.get("output", "").endswith(kept[0].name)]
    assert last and last[-1]["signed"] is False and "not valid JSON" in last[-1]["signing_error"]


def test_required_consent(staged):
    from swapline_core.provenance.c2pa import verify_media

    with pytest.raises(ComfyExecutionError, match="require_consent"):
        staged.run(signed_image_swap("signed_test/no_consent", require_consent=True))

    p = signed_image_swap("signed_test/consent", require_consent=True)
    build = next(k for k, v in p.items() if v["class_type"] == "SwaplineBuildFaceModel")
    p[build]["inputs"].update(consent_given_by="Jane Doe", consent_date="2026-11-01",
                              consent_scope="test campaign", consent_document_sha256=DOC)
    res = sink_result(staged.run(p))
    consent = verify_media(staged.base_dir / "output" / res["results"][0]["file"]).qa["consent"]
    assert consent["given_by"] == "Jane Doe" and consent["scope"] == "test campaign"
    assert consent["document_sha256"] == DOC and len(consent["source_sha256"]) == 1


def test_image_folder_input_is_signed_with_the_folder_as_parent(staged):
    """Load Video Frames on a folder of images, straight into the shipped sink: the MP4 is signed and
    the folder is its parent ingredient (it was opened as a file: IsADirectoryError)."""
    from PIL import Image

    from swapline_core.provenance.c2pa import verify_media
    from swapline_core.provenance.hashing import sha256_media
    from swapline_core.video.read import probe

    folder = staged.base_dir / "input" / "signed_folder_frames"
    folder.mkdir(exist_ok=True)
    for i in range(4):
        Image.new("RGB", (64, 48), (40 * i, 90, 160)).save(folder / f"{i:03d}.png")
    hist = staged.run({
        "1": {"class_type": "SwaplineLoadVideo",
              "inputs": {"video": folder.name, "start": 0, "count": 0, "stride": 1, "chunk": 16}},
        "2": {"class_type": "SwaplineC2PASink",
              "inputs": {"frames": ["1", 0], "filename_prefix": "signed_test/folder", "image_format": "png",
                         "crf": 18, "preset": "medium", "audio": True, "attestation": "",
                         "require_trusted_signer": False, "on_signing_failure": "fail", "require_consent": False}},
    })
    res = sink_result(hist)["results"][0]
    assert res["signed"], res
    out = staged.base_dir / "output" / res["file"]
    assert probe(out).frame_count == 4
    parent = [i for i in verify_media(out).ingredients if i["relationship"] == "parentOf"]
    assert parent and parent[0]["format"] == "inode/directory" and parent[0]["sha256"] == sha256_media(folder)
