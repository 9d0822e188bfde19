"""Every swapper family: detected by its signature, run on real faces through swap_chunk.

The stand-ins (devtools/synthetic_swappers.py) keep the target face recognisable when their
family's pre/post-processing is applied correctly, so "the pasted face still looks like the
frame there" checks normalisation, template and paste-back at once; a wrong normalisation
(e.g. forgetting to undo HyperSwap's [-1,1] output) makes the face region far darker/brighter.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from devtools.media import T1, insightface_image, rgb
from devtools.synthetic_swappers import SWAPPERS, build_swappers
from swapline_core.backends.swappers import FAMILIES, FamilySwapper, detect_family
from swapline_core.backends.swappers import pixel_boost as pb
from swapline_core.errors import BadModelError, SwaplineError
from swapline_core.guards import GuardOptions
from swapline_core.masks import MaskOptions
from swapline_core.swap.chunk import SwapOptions, swap_chunk
from swapline_core.types import SourceIdentity, l2_normalise

EXPECTED = {"hyperswap_1a_256": "hyperswap", "hyperswap_1b_256": "hyperswap", "hyperswap_1c_256": "hyperswap",
            "ghost_1_256": "ghost", "ghost_2_256": "ghost", "ghost_3_256": "ghost",
            "simswap_256": "simswap", "simswap_unofficial_512": "simswap_unofficial_512",
            "blendswap_256": "blendswap", "uniface_256": "uniface",
            "reswapper_128": "inswapper", "reswapper_256": "reswapper_256"}
BY_SIGNATURE = {"simswap_unofficial_512", "blendswap_256", "uniface_256", "reswapper_128"}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return build_swappers(tmp_path_factory.mktemp("swappers"))


@pytest.fixture(scope="module")
def scene():
    """t1.jpg's faces found by the built-in (MTCNN) detector, with random 512-d target embeddings."""
    from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer

    img = rgb(insightface_image(T1))
    faces = BuiltinAnalyzer().detect([img])[0][:3]
    assert len(faces) == 3
    rng = np.random.default_rng(7)
    for f in faces:
        f.embedding = l2_normalise(rng.standard_normal(512).astype(np.float32))
    src_face = faces[0]
    source = SourceIdentity(l2_normalise(rng.standard_normal(512).astype(np.float32)), "arcface",
                            image=img, face=src_face)
    return img, faces, source


def _swap(sw, scene, **kw):
    img, faces, source = scene
    # the swapper's own output is under test: no mask stack cutting it, no guards refusing a face
    return swap_chunk(sw, None, [img], [faces], kw.get("source", source),
                      SwapOptions(color_match=False, masks=MaskOptions(enabled=False),
                                  guards=GuardOptions(enabled=False)))


@pytest.mark.parametrize("model", sorted(EXPECTED))
def test_family_detected_runs_and_pastes_in_place(files, scene, model):
    sw = FamilySwapper(str(files[model]), "CPU")
    assert sw.spec.name == EXPECTED[model]
    assert sw.detected_by == ("signature" if model in BY_SIGNATURE else sw.detected_by)
    if model not in BY_SIGNATURE:
        assert sw.detected_by.startswith("file name")
    res = _swap(sw, scene)
    img = scene[0]
    out = res.frames[0]
    assert out.shape == img.shape and len(res.patches[0]) == 3
    assert all(r["status"] == "swapped" and r["family"] == EXPECTED[model] for r in res.records[0])
    for p in res.patches[0]:
        x0, y0, x1, y1 = p.region
        inside = p.mask > 0.5
        before = img[y0:y1, x0:x1][inside].astype(np.float32)
        after = out[y0:y1, x0:x1][inside].astype(np.float32)
        diff = np.abs(after - before).mean()
        # changed, but still the same face in the same place: the stand-in only tints it
        assert 0.5 < diff < 30, diff
    untouched = np.ones(img.shape[:2], bool)
    for p in res.patches[0]:
        x0, y0, x1, y1 = p.region
        untouched[y0:y1, x0:x1] &= p.mask == 0
    assert np.array_equal(out[untouched], img[untouched])


def test_source_identity_changes_the_result(files, scene):
    img, faces, source = scene
    sw = FamilySwapper(str(files["hyperswap_1a_256"]), "CPU")
    other = SourceIdentity(l2_normalise(-source.embedding), "arcface", image=img, face=faces[1])
    a = _swap(sw, scene).frames[0]
    b = _swap(sw, scene, source=other).frames[0]
    assert np.abs(a.astype(int) - b).max() > 10


def test_wrong_normalisation_would_show(files, scene):
    """Guard for the test itself: treating HyperSwap's [-1,1] output as [0,1] is caught."""
    sw = FamilySwapper(str(files["hyperswap_1a_256"]), "CPU")
    object.__setattr__(sw, "spec", FAMILIES["hyperswap"].__class__(**{**FAMILIES["hyperswap"].__dict__,
                                                                        "output": "unit"}))
    img = scene[0]
    res = _swap(sw, scene)
    p = res.patches[0][0]
    x0, y0, x1, y1 = p.region
    inside = p.mask > 0.5
    after = res.frames[0][y0:y1, x0:x1][inside].astype(np.float32)
    assert np.abs(after - img[y0:y1, x0:x1][inside]).mean() > 45


def test_colliding_signature_without_family_name_is_refused(files, tmp_path):
    import shutil

    from swapline_core.backends.onnx_sessions import create_session

    anon = tmp_path / "my_swapper.onnx"
    shutil.copy(files["hyperswap_1a_256"], anon)
    with pytest.raises(BadModelError, match="shared by the .*hyperswap.*choose the family"):
        detect_family(str(anon), create_session(str(anon), "CPU"))
    spec, how = detect_family(str(anon), create_session(str(anon), "CPU"), "ghost")
    assert spec.name == "ghost" and how == "chosen on the loader"
    with pytest.raises(BadModelError, match="not that family"):
        detect_family(str(anon), create_session(str(anon), "CPU"), "blendswap")


def test_unknown_signature_lists_the_known_families(tmp_path):
    from devtools.synthetic_models import export_swapper

    bad = tmp_path / "odd_swapper.onnx"
    export_swapper(bad, 64)
    with pytest.raises(BadModelError, match="odd_swapper.onnx") as e:
        FamilySwapper(str(bad), "CPU")
    for fam in ("hyperswap", "ghost", "simswap", "blendswap", "uniface", "inswapper", "reswapper_256"):
        assert fam in str(e.value)


def test_missing_converter_named(files, tmp_path):
    import shutil

    lone = tmp_path / "ghost_1_256.onnx"
    shutil.copy(files["ghost_1_256"], lone)
    with pytest.raises(SwaplineError, match="crossface_ghost.onnx"):
        FamilySwapper(str(lone), "CPU")
    sw = FamilySwapper(str(lone), "CPU", converter_dirs=[str(files["crossface_ghost"].parent)])
    assert [r for r, _ in sw.model_files()] == ["swapper", "embedding converter"]


def test_pixel_boost_tiles_roundtrip_and_output_size(files, scene):
    x = np.random.default_rng(1).integers(0, 255, (2, 512, 512, 3), np.uint8)
    t = pb.split(x, 4)
    assert t.shape == (32, 128, 128, 3) and np.array_equal(t[5], x[0, 1::4, 1::4])
    assert np.array_equal(pb.merge(t, 4), x)
    with pytest.raises(ValueError, match="multiple"):
        pb.boost_factor(256, 384)
    sw = FamilySwapper(str(files["reswapper_128"]), "CPU", pixel_boost=512)
    assert sw.k == 4 and sw.crop_size == 512 and sw.mask.shape == (512, 512)
    img, faces, source = scene
    sources, _ = sw.source_inputs(source, faces[:1])
    from swapline_core.faces.align import warp_crops

    crops, _ = warp_crops(img, faces[:1], 512, "arcface_128")
    out = sw.run_crops(crops, sources)
    assert out.shape == (1, 512, 512, 3)
    res = _swap(sw, scene)
    assert all(r["pixel_boost"] == 512 for r in res.records[0])


def test_pixel_boost_equals_tilewise_runs(files, scene):
    img, faces, source = scene
    boosted = FamilySwapper(str(files["hyperswap_1a_256"]), "CPU", pixel_boost=512)
    plain = FamilySwapper(str(files["hyperswap_1a_256"]), "CPU")
    from swapline_core.faces.align import warp_crops

    crops, _ = warp_crops(img, faces[:1], 512, "arcface_128")
    sources, _ = plain.source_inputs(source, faces[:1])
    big = boosted.run_crops(crops, sources)
    tile = plain.run_crops(np.ascontiguousarray(crops[:, 1::2, 0::2]), sources)
    assert np.allclose(big[:, 1::2, 0::2], tile, atol=1e-3)


def test_identity_weight_moves_toward_the_target(files, scene):
    _img, faces, source = scene
    sw_mid = FamilySwapper(str(files["hyperswap_1a_256"]), "CPU")
    sw_low = FamilySwapper(str(files["hyperswap_1a_256"]), "CPU", identity_weight=0.0)
    mid, _ = sw_mid.source_inputs(source, faces)
    low, notes = sw_low.source_inputs(source, faces)
    assert np.allclose(mid, source.embedding[None])
    tgt = np.stack([f.embedding for f in faces])
    # 35 % of the way to each target's identity at weight 0
    assert np.allclose(low, 0.65 * mid + 0.35 * tgt, atol=1e-6)
    assert all(n["identity_weight"] == 0.0 for n in notes)
    a = _swap(sw_mid, scene).frames[0]
    b = _swap(sw_low, scene).frames[0]
    assert np.abs(a.astype(int) - b).max() > 3


def test_stand_ins_keep_published_io(files):
    for role, (_rel, kind, _a) in SWAPPERS.items():
        g = onnx.load(str(files[role]), load_external_data=False).graph
        names = [i.name for i in g.input if i.name not in {x.name for x in g.initializer}]
        assert names == (["input"] if kind in ("converter", "gpen") else ["target", "source"]), role


def test_commercial_switch_and_licences_in_provenance(files):
    from swapline_core.backends.catalog import KNOWN_MODELS, check_commercial
    from swapline_core.backends.manifest import model_manifest
    from swapline_core.provenance.audit_log import make_record
    from swapline_core.provenance.c2pa import model_entry

    assert all(m.commercial in ("yes", "no", "unknown") and m.licence and m.source for m in KNOWN_MODELS)
    hyper = FamilySwapper(str(files["hyperswap_1a_256"]), "CPU")
    with pytest.raises(SwaplineError, match=r"hyperswap_1a_256.onnx': licence ResearchRAIL"):
        check_commercial(hyper.model_files())
    ghost = FamilySwapper(str(files["ghost_1_256"]), "CPU")
    check_commercial(ghost.model_files())      # GHOST and its converter are Apache-2.0
    with pytest.raises(SwaplineError, match="not in Swapline's catalog"):
        check_commercial([("swapper", "/x/my_own_swapper.onnx")])
    models = model_manifest(ghost.model_files())
    assert [(m["name"], m["licence"], m["commercial"]) for m in models] == [
        ("ghost_1_256.onnx", "Apache-2.0", "yes"), ("crossface_ghost.onnx", "Apache-2.0", "yes")]
    rec = make_record(job_id="j", input_sha256=None, output_sha256=None, models=models, settings={},
                      qa_decision=None, signer_fingerprint=None)
    assert rec["models"][0]["licence"] == "Apache-2.0"
    assert model_entry(models[1])["commercial"] == "yes"


@pytest.mark.parametrize("model", ["gpen_bfr_256", "GPEN-BFR-512", "gpen_bfr_1024"])
def test_gpen_restores_in_place(files, scene, model):
    from swapline_core.backends.catalog import licence_of
    from swapline_core.backends.gpen import GpenRestorer
    from swapline_core.faces.paste import apply_patches

    img, faces, _ = scene
    r = GpenRestorer(str(files[model]), "CPU")
    assert r.size == int(model.replace("-", "_").rsplit("_", 1)[-1])
    assert r.template == ("arcface_128" if r.size == 256 else "ffhq_512")
    patches = r.restore([img], [faces], weight=1.0)[0]
    assert len(patches) == 3
    out = apply_patches(img, patches)
    for p in patches:
        x0, y0, x1, y1 = p.region
        inside = p.mask > 0.5
        d = np.abs(out[y0:y1, x0:x1][inside].astype(np.float32) - img[y0:y1, x0:x1][inside]).mean()
        assert 0.3 < d < 25, d
    assert licence_of(str(files[model]))["commercial"] == "no"


def test_gpen_rejects_other_onnx(files):
    from swapline_core.backends.gpen import GpenRestorer

    with pytest.raises(BadModelError, match="not a GPEN-BFR restorer"):
        GpenRestorer(str(files["crossface_ghost"]), "CPU")
