"""The manifest states what was actually done: a real classical swap is signed and read back, and
its actions, digitalSourceType, stages and every model (file, sha256, licence) are checked; a
trained swapper family, restorer and refine models are named; unknowable files are said to be."""
from __future__ import annotations

import json
from pathlib import Path

import c2pa  # noqa: F401  (a hard requirement: missing, this file fails instead of skipping)
import numpy as np
import pytest
from PIL import Image

from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
from swapline_core.backends.classical import ClassicalSwapper
from swapline_core.backends.manifest import stage_manifest
from swapline_core.diffusion import model_origin
from swapline_core.faces import identity
from swapline_core.masks import MaskOptions
from swapline_core.provenance import c2pa as prov
from swapline_core.provenance import method
from swapline_core.provenance import signing as sc
from swapline_core.provenance.hashing import sha256_file
from swapline_core.swap.chunk import SwapOptions
from swapline_core.video import stages as pipeline
from swapline_core.video.frames import FrameSequence

ROOT = Path(__file__).resolve().parents[3]
CLIP = ROOT / "assets" / "samples" / "kling_avatar_clip.mp4"
SOURCE = ROOT / "assets" / "samples" / "source_face.png"


@pytest.fixture(scope="module")
def classical_job(tmp_path_factory):
    """A real classical swap of 6 frames: builtin analyzer (MTCNN + dlib), the landmark warp."""
    store = str(tmp_path_factory.mktemp("store"))
    analyzer = BuiltinAnalyzer()
    source = identity.build_from_images(analyzer, [np.array(Image.open(SOURCE).convert("RGB"))])
    seq = FrameSequence.open(str(CLIP), count=6, chunk=6)
    faces, _ = pipeline.track_faces(seq, analyzer, store, pipeline.Hooks(), mode="largest")
    out, _ = pipeline.swap_frames(seq, faces, source, ClassicalSwapper(), analyzer, store, pipeline.Hooks(),
                                  SwapOptions())
    return out, analyzer


def _sign(tmp_path, stages, consent=None) -> prov.VerifyResult:
    user = tmp_path / "user"
    creds = sc.load_signing_credentials(user)              # the development signer
    out = tmp_path / "out.png"
    Image.fromarray(np.full((32, 32, 3), 120, np.uint8)).save(out)
    target = tmp_path / "target.png"
    Image.fromarray(np.full((32, 32, 3), 60, np.uint8)).save(target)
    models = [m for st in stages for m in st["models"]]
    res = prov.sign_and_verify(out, creds=creds, target_ingredient=(target, "target"), source_ingredient=None,
                               qa_summary={}, models=models, attestation=None, stages=stages, consent=consent)
    assert res.signed, res.error
    return prov.verify_media(out, creds.trust_anchors_pem)


def test_signed_classical_swap_names_the_landmark_warp_and_every_model(classical_job, tmp_path):
    seq, analyzer = classical_job
    check = _sign(tmp_path, stage_manifest(seq.stage_records()))
    assert check.state == "Trusted"

    edits = [a for a in check.actions if a["action"] == "c2pa.edited"]
    assert len(edits) == 1, edits                        # analysis and masks made no pixels
    assert edits[0]["digitalSourceType"] == method.SYNTHETIC_COMPOSITE
    assert "classical landmark warp" in edits[0]["description"]
    assert "trained face-swap model" not in json.dumps(check.actions)

    m = check.qa["method"]
    assert m["digital_source_type"] == method.SYNTHETIC_COMPOSITE
    by_stage = {s["stage"]: s for s in m["stages"]}
    assert list(by_stage) == ["analysis", "swap", "masks"]
    assert by_stage["swap"]["generation"] == "algorithmic" and by_stage["swap"]["swapper"] == "classical_delaunay"
    assert by_stage["swap"]["models"] == []              # no swap weights: Swapline's own code
    assert "built-in skin-colour occluder" in by_stage["masks"]["method"] and by_stage["masks"]["models"] == []
    # every analysis weight file, by name, with the sha256 of its bytes and its licence
    files = {Path(p).name: p for _, p in analyzer.model_files()}
    assert len(files) >= 3
    named = {x["name"]: x for x in by_stage["analysis"]["models"]}
    assert set(named) == set(files)
    for name, path in files.items():
        assert named[name]["sha256"] == sha256_file(path)
        assert named[name]["licence"] and named[name]["role"]
    assert {x["name"] for x in check.qa["models"]} == set(files)


def test_trained_swapper_restorer_and_refine_are_trained_composites(tmp_path):
    from devtools.synthetic_swappers import build_swappers
    from swapline_core.backends.cache import loaded_model_files
    from swapline_core.backends.swappers import FamilySwapper

    files = build_swappers(tmp_path / "swappers")
    ghost = FamilySwapper(str(files["ghost_1_256"]), "CPU", converter_dirs=[str(files["crossface_ghost"].parent)])
    swap = method.swap_record(ghost, tuple(loaded_model_files(ghost)))
    refine = method.StageRecord("refine", "diffusion refine", "trained",
                                (("checkpoint", str(files["ghost_1_256"]), sha256_file(files["ghost_1_256"])),
                                 ("VAE", "unknown file (made by node 7, VAEMerge)", None)))
    stages = stage_manifest([swap, refine])
    assert stages[0]["family"] == "ghost" and stages[0]["method"].startswith("trained face-swap model")
    swapper = {m["role"]: m for m in stages[0]["models"]}
    assert swapper["swapper"]["name"] == "ghost_1_256.onnx"
    assert swapper["swapper"]["sha256"] == sha256_file(files["ghost_1_256"])
    assert swapper["swapper"]["licence"] == "Apache-2.0" and swapper["embedding converter"]["licence"] == "Apache-2.0"
    unknown = stages[1]["models"][1]
    assert unknown["name"].startswith(method.UNKNOWN_FILE) and unknown["sha256"] is None
    check = _sign(tmp_path, stages)
    edits = [a for a in check.actions if a["action"] == "c2pa.edited"]
    assert [e["digitalSourceType"] for e in edits] == [method.TRAINED_COMPOSITE] * 2
    assert check.qa["method"]["digital_source_type"] == method.TRAINED_COMPOSITE
    assert "ghost family" in edits[0]["description"] and "unknown file" in edits[1]["description"]


def test_the_mesh_swap_is_a_synthetic_composite_with_its_method_stated():
    from swapline_core.backends.mesh_swap import MeshSwapper

    sw = MeshSwapper()
    rec = method.swap_record(sw, tuple(sw.model_files()))
    assert rec.method.startswith("dense mesh texture warp") and rec.generation == "algorithmic"
    assert dict(rec.detail)["swapper"] == "mesh_warp"
    assert method.source_type([{"stage": rec.stage, "method": rec.method, "generation": rec.generation,
                                "models": []}]) == method.SYNTHETIC_COMPOSITE


def test_source_type_rules():
    def st(gen):
        return {"stage": "x", "method": "m", "generation": gen, "models": []}
    assert method.source_type([st("none"), st("algorithmic")]) == method.SYNTHETIC_COMPOSITE
    assert method.source_type([st("algorithmic"), st("trained")]) == method.TRAINED_COMPOSITE
    # unknown, or nothing recorded at all, is never declared as less than trained
    assert method.source_type([st("algorithmic"), st("unknown")]) == method.TRAINED_COMPOSITE
    assert method.source_type([st("none")]) == method.TRAINED_COMPOSITE
    assert method.source_type([]) == method.TRAINED_COMPOSITE


def test_mask_models_are_named_with_their_role(tmp_path):
    occ, parser = tmp_path / "xseg_1.onnx", tmp_path / "bisenet_resnet_34.onnx"
    occ.write_bytes(b"x")
    parser.write_bytes(b"y")
    opts = MaskOptions(occlusion="builtin+model", occluder_path=str(occ), region_path=str(parser))
    assert opts.model_files() == [("occluder (XSeg)", str(occ)), ("face parser (BiSeNet)", str(parser))]
    assert "XSeg" in opts.describe() and "BiSeNet" in opts.describe()
    rec = method.StageRecord("masks", opts.describe(), "none",
                             tuple((r, p, sha256_file(p)) for r, p in opts.model_files()))
    entries = stage_manifest([rec])[0]["models"]
    assert [e["licence"] for e in entries] == ["GPL-3.0 (DeepFaceLab)", "MIT (yakhyo/face-parsing)"]


def test_refine_models_traced_to_their_loaders(tmp_path):
    """The files behind a MODEL/VAE/CONTROL_NET input, read off the prompt, LoRA followed through."""
    folders = {"checkpoints": tmp_path / "ckpt", "loras": tmp_path / "lora", "controlnet": tmp_path / "cn"}
    for d in folders.values():
        d.mkdir()
    (folders["checkpoints"] / "v1-5-pruned-emaonly-fp16.safetensors").write_bytes(b"ckpt")
    (folders["loras"] / "skin.safetensors").write_bytes(b"lora")
    (folders["controlnet"] / "control_v11p_sd15_openpose_fp16.safetensors").write_bytes(b"cn")

    def resolve(folder, name):
        p = folders.get(folder, tmp_path / "none") / name
        return str(p) if p.is_file() else None

    prompt = {
        "1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "v1-5-pruned-emaonly-fp16.safetensors"}},
        "2": {"class_type": "LoraLoaderModelOnly", "inputs": {"model": ["1", 0], "lora_name": "skin.safetensors",
                                                             "strength_model": 1.0}},
        "3": {"class_type": "ControlNetLoader",
              "inputs": {"control_net_name": "control_v11p_sd15_openpose_fp16.safetensors"}},
        "4": {"class_type": "VAELoader", "inputs": {"vae_name": "gone.safetensors"}},
        "5": {"class_type": "SomeMergeNode", "inputs": {}},
        "9": {"class_type": "SwaplineRefineFrames", "inputs": {"model": ["2", 0], "vae": ["1", 2],
                                                               "control_net": ["3", 0]}},
        "10": {"class_type": "SwaplineRefineFrames", "inputs": {"model": ["5", 0], "vae": ["4", 0]}},
    }
    model = model_origin.trace(prompt, "9", "model", "model", resolve, sha256_file)
    assert [(r, Path(p).name, s) for r, p, s in model] == [
        ("LoRA", "skin.safetensors", sha256_file(folders["loras"] / "skin.safetensors")),
        ("checkpoint", "v1-5-pruned-emaonly-fp16.safetensors",
         sha256_file(folders["checkpoints"] / "v1-5-pruned-emaonly-fp16.safetensors"))]
    vae = model_origin.trace(prompt, "9", "vae", "vae", resolve, sha256_file)
    assert vae[0][0] == "VAE (from the checkpoint)" and vae[0][1].endswith("v1-5-pruned-emaonly-fp16.safetensors")
    cn = model_origin.trace(prompt, "9", "control_net", "control_net", resolve, sha256_file)
    assert cn[0][0] == "ControlNet" and cn[0][2] == sha256_file(folders["controlnet"] /
                                                               "control_v11p_sd15_openpose_fp16.safetensors")
    # a merge node and a missing file: named as unknown, never dropped
    (r1, p1, s1), = model_origin.trace(prompt, "10", "model", "model", resolve, sha256_file)
    assert p1.startswith(method.UNKNOWN_FILE) and "SomeMergeNode" in p1 and s1 is None
    (r2, p2, s2), = model_origin.trace(prompt, "10", "vae", "vae", resolve, sha256_file)
    assert "gone.safetensors not found" in p2 and s2 is None
    entries = stage_manifest([method.StageRecord("refine", "diffusion refine", "trained",
                                                 tuple(model + vae + cn))])[0]["models"]
    lic = {e["name"]: e["licence"] for e in entries}
    assert lic["v1-5-pruned-emaonly-fp16.safetensors"] == "CreativeML OpenRAIL-M"
    assert lic["control_v11p_sd15_openpose_fp16.safetensors"] == "CreativeML OpenRAIL-M"
