"""The built-in occluder's rules as one registry (``masks/rules.py``, issue 49 item 4): each rule can
be switched off by name (an unknown name is refused with the valid ones), and each face's record
counts what each rule kept, and says where a rule switched itself off.

Driven on the shipped sample (MIT; red glasses under red light, which the glasses and colour rules
keep) with the classical swapper, guards off.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from swapline_core.errors import SwaplineError  # noqa: E402
from swapline_core.masks import MaskOptions, rules  # noqa: E402

SAMPLE = ROOT / "assets" / "samples" / "kling_avatar_clip.mp4"
KEEPS = tuple(r.name for r in rules.RULES if r.unit == rules.KEPT)


def test_registry_entries_are_complete_and_unique():
    assert len(set(rules.NAMES)) == len(rules.NAMES)
    for r in rules.RULES:
        assert r.why and r.unit and r.where, r
        assert r.why.isascii() and len(r.why) < 200, r.name
    assert set(rules.NOTE_OF.values()) <= set(rules.NAMES)


def test_an_unknown_rule_is_refused_with_the_valid_names():
    with pytest.raises(SwaplineError) as err:
        MaskOptions(rules_off=("wires", "eyebrows"))
    msg = str(err.value)
    assert "eyebrows" in msg and all(n in msg for n in rules.NAMES), msg
    with pytest.raises(SwaplineError):
        rules.parse_off("skin, hnads")


def test_rules_off_is_normalised_and_keys_the_cache_only_when_set():
    opts = MaskOptions(rules_off=rules.parse_off(" Wires ; glare,,"))
    assert opts.rules_off == ("wires", "glare")          # the registry's order, whatever the user's
    assert "rules_off" not in MaskOptions().to_json()        # keys of jobs made before the registry hold
    assert opts.to_json()["rules_off"] == list(opts.rules_off)
    assert "without wires, glare" in opts.describe()


@pytest.fixture(scope="module")
def sample():
    from PIL import Image

    from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
    from swapline_core.faces import identity as face_model
    from swapline_core.video.frames import FrameSequence

    if not SAMPLE.is_file():
        pytest.fail(f"{SAMPLE} missing: it ships with the repository")
    analyzer = BuiltinAnalyzer()
    source = face_model.build_from_images(
        analyzer, [np.array(Image.open(ROOT / "assets" / "samples" / "source_face.png").convert("RGB"))])
    frames = [f for _, ch in FrameSequence.open(str(SAMPLE), start=0, count=5, chunk=5).iter_chunks() for f in ch]
    found = [fs[:1] for fs in analyzer.detect(frames)]
    assert all(found), "the sample clip's first frames each show a face"
    analyzer.landmarks68(frames, found)
    for fs in found:
        fs[0].track_id = 0
    return analyzer, source, frames, found


def _swap(sample, **opts):
    from swapline_core.backends.classical import ClassicalSwapper
    from swapline_core.guards import GuardOptions
    from swapline_core.swap.chunk import SwapOptions, swap_chunk

    analyzer, source, frames, found = sample
    return swap_chunk(ClassicalSwapper(), analyzer, frames, [[fs[0].copy()] for fs in found], source,
                      SwapOptions(masks=MaskOptions(**opts), guards=GuardOptions(enabled=False)))


def test_each_face_record_counts_every_rule(sample):
    res = _swap(sample)
    recs = [r[0]["masks"]["rules"] for r in res.records]
    for rec in recs:
        assert list(rec) == list(rules.NAMES), rec
        assert all(set(v) <= {"count", "off"} and v["count"] >= 0 for v in rec.values()), rec
    # the sample's red glasses under red light: the colour model and the frames' shape keep them
    print("\n[masks] rule counts on the sample's frames 0-4:",
          {n: [rec[n]["count"] for rec in recs] for n in rules.NAMES})
    assert all(rec["skin"]["count"] > 500 for rec in recs), recs
    assert sum(rec["glasses"]["count"] for rec in recs) > 0, recs


def test_a_rule_switched_off_keeps_nothing_and_says_so(sample):
    on = _swap(sample)
    off = _swap(sample, rules_off=("glasses",))
    rec = off.records[0][0]["masks"]["rules"]
    assert rec["glasses"] == {"disabled": True}
    assert rec["skin"]["count"] > 0
    changed = [not np.array_equal(a[0].mask, b[0].mask) for a, b in zip(on.patches, off.patches)]
    assert any(changed), "switching the glasses rule off changed no paste mask"
    # every rule that keeps pixels off: the occluder keeps nothing
    none = _swap(sample, rules_off=KEEPS)
    for p, r in zip(none.patches, none.records):
        assert "occlusion" not in p[0].layers or p[0].layers["occlusion"].min() == 1.0, r[0]["masks"]["rules"]
        assert all(r[0]["masks"]["rules"][n] == {"disabled": True} for n in KEEPS)


def test_a_rule_that_switches_itself_off_says_why_in_the_record(sample):
    """The sample shrunk to a quarter (a ~40 px face, under ``texture.MIN_FACE`` at work scale):
    the texture rule would read the brows' and hairline's edges as texture there, so it switches
    itself off and the record says why; at full size it stays on."""
    import cv2

    from swapline_core.masks import texture

    analyzer, source, frames, found = sample
    k = 4
    small = [cv2.resize(f, (f.shape[1] // k, f.shape[0] // k), interpolation=cv2.INTER_AREA) for f in frames[:2]]
    faces = [[fs[0].copy(bbox=fs[0].bbox / k, kps=fs[0].kps / k, landmarks=fs[0].landmarks / k)] for fs in found[:2]]
    plain = _swap((analyzer, source, frames[:2], found[:2])).records[0][0]["masks"]["rules"]
    tiny = _swap((analyzer, source, small, faces)).records[0][0]["masks"]["rules"]
    assert "off" not in plain["texture"], plain
    why = tiny["texture"].get("off", "")
    assert "px face at work scale" in why and f"{texture.MIN_FACE:.0f}" in why, tiny
    assert tiny["texture"]["count"] == 0, tiny


def test_a_full_resolution_rule_keeps_its_frame_pixels_exactly_and_counts_them():
    """The slot a frame-sized rule (``hands.hand_masks``' per-face masks) comes in through."""
    from types import SimpleNamespace

    from swapline_core.masks import builtin

    it = SimpleNamespace(origin=np.array([10.0, 20.0], np.float32), shape=(50, 40), info={"rules": rules.record(())},
                         parts={"occlusion": np.ones((50, 40), np.float32)})
    frame_map = np.zeros((100, 100), np.uint8)
    frame_map[30:40, 20:30] = 255                    # patch rows 10-20, columns 10-20
    builtin.keep_pixels(it, "wires", builtin.in_patch(it, frame_map))
    occ = it.parts["occlusion"]
    assert it.info["rules"]["wires"]["count"] == 100
    assert occ[10:20, 10:20].max() == 0.0, "the rule's pixels are not kept exactly"
    assert occ[30:, 30:].min() == 1.0 and occ[:5, :5].min() == 1.0, "pixels away from the rule's are kept"
