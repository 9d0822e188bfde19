"""Colours skin never has are occluders (``masks/chroma.py``): the sky beside a turned face.

On the ltx clip (a woman in a headdress against the sky, video_ltx2_3_i2v) the classical
swapper's hull reaches past her cheek, and the skin model read the grey-blue sky as a pale skin
tone (4.5 sigma, at the threshold): the swap painted a square jaw over the sky. Judged by hue
angle, the sky is cut and the face keeps the target's outline.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from ltx_swap import plain_and_stack  # noqa: E402
from PIL import Image  # noqa: E402

from swapline_core.masks import chroma  # noqa: E402
from swapline_core.masks import occlusion as occ  # noqa: E402

TOL = 8


def _lab(rgb):
    return occ.lab(np.array([[rgb]], np.uint8))[0, 0]


def test_hue_angle_rule_on_known_colours():
    rng = np.random.default_rng(0)
    # brown skin from shadow to light: the same hue fan, chroma from 15 to 35; the sky is the ltx
    # clip's (Lab 56, -4, -7)
    skin = np.stack([rng.uniform(30, 70, 500), rng.uniform(10, 22, 500), rng.uniform(12, 26, 500)], 1)
    ref, spread = chroma.skin_angle(skin)
    assert 40 < ref < 60 and spread < 30, (ref, spread)
    thr = 4.5 ** 2
    colours = {"sky": (120, 136, 146), "foliage": (70, 110, 60), "blue sleeve": (60, 90, 170),
               "grey": (128, 128, 128), "white": (240, 240, 240), "skin": (150, 100, 75),
               "pale skin": (200, 170, 150), "lips": (170, 70, 70)}
    lab = np.stack([_lab(c) for c in colours.values()])[None]
    d2 = dict(zip(colours, chroma.off_hue(lab, ref, spread)[0]))
    assert d2["sky"] > thr and d2["foliage"] > thr and d2["blue sleeve"] > thr, d2
    # no hue to judge (the skin model's lightness term has to see these), and skin's own hues
    assert d2["grey"] == d2["white"] == d2["skin"] == d2["pale skin"] == 0.0, d2
    assert d2["lips"] < thr, d2
    # not judged where told not to (the lips' margin)
    assert chroma.off_hue(lab, ref, spread, np.zeros(lab.shape[:2], bool)).max() == 0.0


def test_too_few_coloured_samples_give_no_rule():
    grey = np.tile([50.0, 0.5, -0.5], (200, 1))
    assert chroma.skin_angle(grey) is None


def test_sky_beside_a_turned_face_is_not_painted(tmp_path):
    frames, faces, results = plain_and_stack(tmp_path, 30, 8)
    sky_px = painted = 0
    for k, (f, a, b) in enumerate(zip(frames, results["plain"], results["stack"])):
        fs = faces.frames[k].faces
        assert fs, f"no face on frame {30 + k}"
        x0, y0, x1, y1 = (int(v) for v in fs[0].bbox)
        h = y1 - y0
        # sky, by a test that shares nothing with the rule: blue above red (skin never is), in the
        # face's rows (not above the headdress)
        rgb = f.astype(np.int16)
        sky = rgb[..., 2] > rgb[..., 0] + 6
        sky[: max(0, y0 - h // 4)] = False
        sky[y1 + h // 4:] = False
        near = np.abs(a.astype(np.int16) - f).max(-1) > TOL      # what the plain swap reaches
        sel = sky & near
        sky_px += int(sel.sum())
        painted += int((np.abs(b.astype(np.int16) - f).max(-1)[sel] > TOL).sum())
        if k == 4:
            Image.fromarray(np.concatenate([f, a, b], 1)).save(tmp_path / "sky.png")
    assert sky_px > 300, f"the plain swap reaches only {sky_px} sky pixels: nothing to test"
    share = painted / sky_px
    print(f"\n[masks] sky beside the jaw: {share:.1%} of {sky_px} sky pixels the plain swap paints are "
          "painted with the stack")
    assert share <= 0.1, f"{share:.1%} of the sky the plain swap paints is still painted"
