"""Glasses frames vs the lenses they hold (``glasses.glasses``), on a synthetic face drawn with
exact pixel masks: a saturated frame ring is kept (an occluder), a tinted lens inside it is not
(the eye behind it is swapped), an opaque dark lens stays an occluder, and an eye without glasses
gives no frame. The real case (the kling clip's red frames and red-tinted lenses) is in
test_mask_stack.py (test_red_glasses_of_the_sample_clip_stay)."""
import cv2
import numpy as np
import pytest

from swapline_core.masks import glasses as glasses_mod
from swapline_core.masks import occlusion as occ

SKIN = (205, 150, 125)
FRAME = (215, 25, 45)            # a saturated red frame
EYES = np.array([[70.0, 90.0], [140.0, 90.0]])   # eye distance 70 px, the built-in's work scale


def _face(frame=True, lens=None, seed=0):
    """Skin with shading and noise, two eyes (sclera, iris, pupil), optionally glasses.
    ``lens``: None (no lens), ("tint", (r, g, b) transmission) or ("opaque", rgb).
    Returns the image and the exact masks (the frame's rims around the lenses, lens interior);
    the bridge and the temple arm are drawn too but not in the rim mask: the colour tests find
    those, ``glasses`` only the closed rims."""
    rng = np.random.default_rng(seed)
    h, w = 180, 210
    img = np.empty((h, w, 3), np.float32)
    img[:] = SKIN
    img *= np.linspace(0.85, 1.05, w)[None, :, None]          # light from one side
    for e in EYES:
        c = tuple(int(v) for v in e)
        cv2.ellipse(img, c, (13, 6), 0, 0, 360, (235, 230, 225), -1)
        cv2.circle(img, c, 6, (90, 60, 40), -1)
        cv2.circle(img, c, 3, (20, 15, 15), -1)
        cv2.ellipse(img, (c[0], c[1] - 16), (15, 3), 0, 0, 360, (80, 55, 40), -1)   # brow
    ring_m = np.zeros((h, w), np.uint8)
    lens_m = np.zeros((h, w), np.uint8)
    rims = np.zeros((h, w), np.uint8)
    if frame:
        for e in EYES:
            c = tuple(int(v) for v in e)
            cv2.ellipse(lens_m, c, (26, 18), 0, 0, 360, 1, -1)
            cv2.ellipse(ring_m, c, (30, 22), 0, 0, 360, 1, -1)
        ring_m &= 1 - lens_m
        rims = ring_m.copy()                 # the closed rims alone (glasses() finds those)
        (lx, ly), (rx, ry) = (tuple(int(v) for v in e) for e in EYES)
        cv2.line(ring_m, (lx + 28, ly - 4), (rx - 28, ry - 4), 1, 4)          # bridge
        cv2.line(ring_m, (rx + 29, ry - 6), (w - 1, ry - 12), 1, 4)           # temple arm
        ring_m &= 1 - lens_m
    ring_b, lens_b = ring_m.astype(bool), lens_m.astype(bool)
    if lens is not None:
        kind, v = lens
        if kind == "tint":
            img[lens_b] *= np.asarray(v, np.float32)
        else:
            img[lens_b] = v
    if frame:
        img[ring_b] = FRAME
    img += rng.normal(0, 2.0, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8), rims.astype(bool), lens_b


def _skin(img):
    """Skin samples below the eyes (what ``builtin`` pools from the cheeks)."""
    lab = occ.lab(img)
    return lab[125:160, 40:170].reshape(-1, 3)


def _run(img):
    lab = occ.lab(img)
    return glasses_mod.glasses(lab, EYES, _skin(img))


def test_tinted_lens_is_swapped_and_its_frame_kept():
    img, ring_t, lens_t = _face(lens=("tint", (0.8, 0.5, 0.5)))
    ring, lens, info = _run(img)
    # the inner pixels of each exact region: the colour tests see a lightly blurred image
    core = lambda m: cv2.erode(m.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
    frame_found = float(ring[core(ring_t)].mean())
    lens_found = float(lens[core(lens_t)].mean())
    print(f"\n[lenses] tinted: frame {frame_found:.1%} found, lens {lens_found:.1%} found as see-through; {info}")
    assert frame_found >= 0.8
    assert lens_found >= 0.9
    assert float(lens[core(ring_t)].mean()) < 0.02, "the frame must not be taken for lens"
    # ... and in the skin-distance map: the lens becomes skin, the frame an occluder
    d2 = np.full(img.shape[:2], 30.0, np.float32)       # "everything looks like an occluder"
    out, lens_map, _, _ = glasses_mod.see_through_lenses(d2, occ.lab(img), EYES, _skin(img))
    assert lens_map is not None
    assert float((out[core(lens_t)] == 0).mean()) >= 0.9
    assert float((out[core(ring_t)] >= glasses_mod.RING_D2).mean()) >= 0.8


def test_opaque_dark_lens_stays_an_occluder():
    img, ring_t, lens_t = _face(lens=("opaque", (30, 28, 32)))
    ring, lens, info = _run(img)
    print(f"\n[lenses] opaque: {info}")
    assert not lens.any(), "a dark, opaque lens (sunglasses) must not be swapped through"
    d2 = np.full(img.shape[:2], 30.0, np.float32)
    out, lens_map, _, _ = glasses_mod.see_through_lenses(d2, occ.lab(img), EYES, _skin(img))
    assert lens_map is None and (out >= 30.0).all()


@pytest.mark.parametrize("skin", [SKIN, (200, 120, 95), (235, 120, 110)])
def test_no_glasses_no_frame(skin):
    """Around an eye without glasses the brightest skin can form a "ring": it is neither a thin
    band nor more chromatic than the skin, so nothing is found and the map is left alone."""
    global SKIN
    keep, SKIN = SKIN, skin
    try:
        img, _, _ = _face(frame=False)
    finally:
        SKIN = keep
    ring, lens, info = _run(img)
    print(f"\n[lenses] no glasses {skin}: {info}")
    assert not ring.any() and not lens.any()


def test_clear_lens_frame_kept_eye_swapped():
    """A clear lens (no tint) shows skin: the colour tests already pass it; the frame is kept."""
    img, ring_t, lens_t = _face(lens=("tint", (1.0, 1.0, 1.0)))
    ring, lens, _ = _run(img)
    core = cv2.erode(ring_t.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
    assert float(ring[core].mean()) >= 0.8
    assert float(lens[core].mean()) < 0.02


def test_open_lenses_swaps_the_lens_up_to_its_frame():
    """The occluder's cut is feathered outward (``occlusion.soften``), which ate into a small lens;
    ``open_lenses`` lets the swap fill the lens again up to the frame and never onto it."""
    img, ring_t, lens_t = _face(lens=("tint", (0.8, 0.5, 0.5)))
    ring, lens, _ = _run(img)
    size = 2.5 * float(np.linalg.norm(EYES[1] - EYES[0]))         # a face ~2.5 eye distances wide
    # the cut as the builtin occluder makes it: the frame grown a little (the colour test's blur)
    cut = cv2.dilate(ring.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
    may = occ.soften(cut, 0.0, 0.02 * size)
    # the lens more than 4 px from its frame (LENS_MARGIN of this face: 2 px, the frame grown by 2 px)
    core = cv2.erode(lens_t.astype(np.uint8), np.ones((9, 9), np.uint8)).astype(bool)
    before = float((may[core] > 0.95).mean())
    out = glasses_mod.open_lenses(may.copy(), lens, ring, size)
    after = float((out[core] > 0.95).mean())
    frame = cv2.erode(ring_t.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
    print(f"\n[lenses] lens interior fully swapped: {before:.1%} -> {after:.1%}; "
          f"frame max may-swap {float(out[frame].max()):.3f}")
    assert after >= 0.9 and after > before + 0.2
    assert float(out[ring].max()) == 0.0, "the frame as found stays the target's"
    assert float((out[frame] > 0.02).mean()) <= 0.01
    assert np.array_equal(out[~lens], may[~lens]), "outside the lenses nothing changes"
    nothing = glasses_mod.open_lenses(may.copy(), np.zeros_like(lens), ring, size)
    assert np.array_equal(nothing, may)


@pytest.mark.parametrize("source_skin", [(170, 130, 110), (120, 90, 80), (230, 200, 180)])
def test_lens_tint_holds_whether_or_not_paste_matches_colour(source_skin):
    """Issue 32 item 2: ``tint_lenses`` is written against paste-back's whole-face colour match,
    but paste matches only when the swapper does not match colour itself and ``color_match`` is
    on (the classical path and color_match=False skip it). The tint is a move relative to the
    patch's own face, so it holds either way: matched, the lens sits where the target's lens sits
    against the target's face (Lab); unmatched, the lens sits against the swapped face as the
    target's lens against the target's face, scaled by the faces' spread."""
    from swapline_core.faces.paste import color_match

    rng = np.random.default_rng(1)
    h, w = 160, 200
    lens = np.zeros((h, w), np.uint8)
    for c in ((65, 80), (135, 80)):
        cv2.ellipse(lens, c, (26, 18), 0, 0, 360, 1, -1)
    lens = lens.astype(bool)

    def face(skin, tint=None):
        img = np.empty((h, w, 3), np.float32)
        img[:] = skin
        img *= np.linspace(0.85, 1.05, w)[None, :, None]
        img += rng.normal(0, 4, img.shape)
        if tint is not None:
            img[lens] *= np.asarray(tint, np.float32)
        return np.clip(img, 0, 255)

    def lab(im):
        return cv2.cvtColor(np.clip(im, 0, 255).astype(np.float32) / 255, cv2.COLOR_RGB2Lab)

    def offset(im):                        # lens mean - face mean (Lab), face spread
        L = lab(im)
        return L[lens].mean(0) - L[~lens].mean(0), L[~lens].std(0)

    target = face((200, 150, 120), (1.0, 0.55, 0.6))          # red-tinted lenses
    mask = np.ones((h, w), np.float32)
    out = glasses_mod.tint_lenses(face(source_skin), mask, lens, lab(target),
                                  np.array([[1, 0, 0], [0, 1, 0]], np.float32))
    t_off, t_sd = offset(target)
    assert t_off[1] > 20                                       # the target's lenses are clearly red
    matched, _ = offset(color_match(out, target.astype(np.uint8), mask))
    assert np.abs(matched - t_off).max() < 2.0, (matched, t_off)
    unmatched, o_sd = offset(out)
    want = t_off * o_sd / t_sd
    assert np.abs(unmatched - want).max() < 0.15 * np.abs(t_off).max(), (unmatched, want)
    assert unmatched[1] > 20                                   # still red through the lens, unmatched
