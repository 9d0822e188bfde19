"""The gate's reference skin colours and its occluder estimate, computed the fast way (1-D bin
keys, a k-d tree, the bin grid of near_skin, the hull's box), equal the plain definitions: every
pixel against every bin of the reference, the whole crop; so do the local dilations and the mouth
profile read from its patch alone."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import cv2  # noqa: E402
import numpy as np  # noqa: E402

from swapline_core.faces.shape import MEAN68  # noqa: E402
from swapline_core.qa import metrics_image as mi  # noqa: E402


def _lab_face(seed: int):
    """A 160 px face-like crop: two skin tones, dark frames and noise, with a 68-point ring."""
    rng = np.random.default_rng(seed)
    img = np.empty((160, 160, 3), np.uint8)
    img[:] = (200, 150, 125)
    img[:, 80:] = (140, 95, 80)                         # shaded half
    cv2.rectangle(img, (30, 55), (130, 70), (30, 20, 20), 6)     # a frame across the face
    img = np.clip(img + rng.normal(0, 5, img.shape), 0, 255).astype(np.uint8)
    t = np.linspace(0, 2 * np.pi, 68, endpoint=False)
    lm = np.stack([80 + 60 * np.cos(t), 85 + 65 * np.sin(t)], 1).astype(np.float32)
    return mi.lab(img), lm


def test_skin_colours_and_occluder_match_the_plain_definitions():
    for seed in range(3):
        lab, lm = _lab_face(seed)
        reg = mi.face_regions(lab.shape[:2], lm)
        ref = reg["hull"] & ~reg["features"]
        ref[:, 75:] = False                   # the lit half is the reference: the frame and the shade are not
        px = lab[ref]
        q = np.floor(px / mi.REF_BIN).astype(np.int32)
        bins, counts = np.unique(q, axis=0, return_counts=True)
        plain = (bins[counts >= max(2, mi.REF_MIN_SHARE * len(px))].astype(np.float32) + 0.5) * mi.REF_BIN
        colours = mi.skin_colours(lab, ref)
        assert np.array_equal(colours, plain)

        occ = mi.estimate_occluder(lab, reg, colours=colours)
        cand = reg["hull"] & ~reg["features"]
        d = np.linalg.norm(lab[cand][:, None, :] - colours[None], axis=-1).min(axis=1)
        want = np.zeros(ref.shape, np.uint8)
        want[cand] = d > mi.SKIN_DE
        want = cv2.morphologyEx(want, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8)).astype(bool)
        assert want.any() and np.array_equal(occ, want)


def test_local_dilation_matches_dilating_the_whole_mask():
    rng = np.random.default_rng(7)
    for grow in (0, 1, 4, 17):
        for _ in range(20):
            m = np.zeros((120, 90), np.uint8)
            x, y = (int(v) for v in rng.integers(-10, 100, 2))        # blobs at and past the edges too
            cv2.ellipse(m, (x, y), tuple(int(v) for v in rng.integers(1, 25, 2)), float(rng.uniform(0, 180)),
                        0, 360, 1, -1)
            k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * grow + 1, 2 * grow + 1))
            assert np.array_equal(mi.dilate_disc(m, grow), cv2.dilate(m, k))
    assert not mi.dilate_disc(np.zeros((9, 9), np.uint8), 3).any()


def test_mouth_profile_reads_only_its_patch():
    """The profile from the patch's box equals the one from the whole frame, at the frame's edges
    and past them too (BORDER_REPLICATE repeats the edge pixels either way)."""
    from swapline_core.qa import metrics_expression as me

    rng = np.random.default_rng(11)
    frame = cv2.GaussianBlur(rng.integers(0, 256, (180, 320, 3), dtype=np.uint8), (5, 5), 0)
    t = np.linspace(0, 2 * np.pi, 68, endpoint=False)
    base = np.stack([60 + 40 * np.cos(t), 70 + 45 * np.sin(t)], 1).astype(np.float32)
    base[36:42] = (45, 55)
    base[42:48] = (75, 57)               # eyes slightly tilted: the patch is rotated
    for shift in ((0, 0), (100.37, 20.5), (-58.2, 0), (250, 95.7), (-500, 0), (0, 400)):
        lm = base + np.float32(shift)
        value = frame.max(axis=2).astype(np.float32)                  # the whole frame, as defined
        eye_l, eye_r = lm[36:42].mean(0).astype(np.float64), lm[42:48].mean(0).astype(np.float64)
        iod = float(np.linalg.norm(eye_r - eye_l))
        ux = (eye_r - eye_l) / iod
        uy = np.array([-ux[1], ux[0]])
        centre = lm[48:68].mean(0) + uy * me.PROFILE_DOWN * iod
        sx, sy = me.PROFILE_WIDTH * iod / me.PROFILE_COLS, me.PROFILE_HEIGHT * iod / me.PROFILE_ROWS
        a = np.array([[ux[0] * sx, uy[0] * sy, 0.0], [ux[1] * sx, uy[1] * sy, 0.0]])
        a[:, 2] = centre - a[:, :2] @ np.array([me.PROFILE_COLS / 2, me.PROFILE_ROWS / 2])
        patch = cv2.warpAffine(value, a, (me.PROFILE_COLS, me.PROFILE_ROWS),
                               flags=cv2.INTER_AREA | cv2.WARP_INVERSE_MAP, borderMode=cv2.BORDER_REPLICATE)
        patch = (patch - patch.mean()) / max(float(patch.std()), 1e-3)
        want = [round(float(v), 3) for v in patch[:, me.PROFILE_COLS // 4: 3 * me.PROFILE_COLS // 4].mean(axis=1)]
        assert me.mouth_profile(frame, lm) == want, shift


def test_near_skin_is_the_distance_test_exactly():
    """The bin grid's near/far/undecided shortcut gives the k-d tree's answer pixel for pixel,
    on random colours and on pixels placed right at the radius around them (where rounding would
    show), and for colours that are not bin centres (measured directly)."""
    rng = np.random.default_rng(3)
    for radius in (mi.SKIN_DE, 7.0, 20.0):
        for _ in range(5):
            bins = np.unique(rng.integers(-8, 8, (rng.integers(1, 40), 3)) + [18, 3, 5], axis=0)
            colours = ((bins + 0.5) * mi.REF_BIN).astype(np.float32)
            spread = rng.uniform(-40, 40, (4000, 3)) + colours.mean(0)
            c = colours[rng.integers(0, len(colours), 4000)]
            u = rng.normal(size=(4000, 3))
            rim = c + u / np.linalg.norm(u, axis=1, keepdims=True) * (radius + rng.uniform(-1e-4, 1e-4, (4000, 1)))
            px = np.concatenate([spread, rim]).astype(np.float32)
            want = mi._skin_distance(px, colours) <= radius
            assert want.any() and not want.all()
            assert np.array_equal(mi.near_skin(px, colours, radius), want)
    odd = np.array([[60.3, 10.1, 12.7]], np.float32)
    px = (odd + rng.normal(0, 8, (500, 3))).astype(np.float32)
    assert np.array_equal(mi.near_skin(px, odd, mi.SKIN_DE), mi._skin_distance(px, odd) <= mi.SKIN_DE)
    assert not mi.near_skin(px, np.zeros((0, 3), np.float32), mi.SKIN_DE).any()


def test_occluders_measured_on_the_hull_box_match_the_whole_crop():
    """_occluders works on the hull's box; the occluder mask and overwrite equal the estimate on
    the whole crop, with wires crossing the hull's edge and a rim along it (where the opening's
    erosion meets the box border)."""
    rng = np.random.default_rng(5)
    for seed in range(3):
        lm = (MEAN68 * (150 + 20 * seed) + [250, 200]).astype(np.float32)     # a face ~330 px wide
        reg = mi.occluder_regions((520, 500), lm)
        skin = np.empty((520, 500, 3), np.uint8)
        skin[:] = (200, 150, 125)
        skin[:, 250:] = (140, 95, 80)
        img = skin.copy()
        for _ in range(4):                                 # 3-6 px dark wires across the whole crop
            y = int(rng.integers(170, 360))
            cv2.line(img, (0, y), (499, y + int(rng.integers(-40, 40))), (25, 20, 20), int(rng.integers(3, 7)))
        cv2.circle(img, (250, 270), 150 + 20 * seed, (40, 40, 160), 3)     # a rim crossing the hull's edge
        img[reg["skin_ref"]] = skin[reg["skin_ref"]]             # the cheeks stay skin: the reference
        img = np.clip(img + rng.normal(0, 4, img.shape), 0, 255).astype(np.uint8)
        swapped = img.copy()
        swapped[:, 150:300] = np.clip(swapped[:, 150:300].astype(int) + 30, 0, 255).astype(np.uint8)

        got = mi._occluders(img, swapped, lm, None)
        lo = mi.lab(img)
        colours = mi.reference_colours(lo, reg)
        want = mi.estimate_occluder(lo, reg, colours=colours)
        assert np.array_equal(got["occ"], want) and np.array_equal(got["colours"], colours)
        assert got["occluder_share"] == float(want.sum() / reg["hull"].sum()) > mi.MIN_OCCLUDER_SHARE
        de = mi.delta_e(mi.lab(swapped)[want], lo[want])
        assert 0 < got["occluder_overwrite"] == float((de > mi.CHANGED_DE).mean()) < 1
