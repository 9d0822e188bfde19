"""Face ControlNet core: hint drawing on real landmarks, face masks, per-block schedule maths."""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
from swapline_core.diffusion import hints as face_hint
from swapline_core.diffusion.control_schedule import (
    BlockSchedule,
    apply_schedule,
    match_batch,
    resize_mask,
)
from swapline_core.faces.align import estimate_norm, template, transform_points

SAMPLE = Path(__file__).resolve().parents[3] / "assets" / "samples" / "target_reference.png"


@pytest.fixture(scope="module")
def real_face():
    """A real photo and its face with dlib's 68 landmarks (built-in analyzer)."""
    rgb = cv2.cvtColor(cv2.imread(str(SAMPLE)), cv2.COLOR_BGR2RGB)
    analyzer = BuiltinAnalyzer()
    faces = analyzer.detect([rgb])
    analyzer.landmarks68([rgb], faces)
    assert faces[0], "no face in the sample photo"
    return rgb, faces[0][0]


def _blobs(mask: np.ndarray) -> int:
    return cv2.connectedComponents(mask.astype(np.uint8))[0] - 1


def test_openpose_face_dots_at_every_landmark_and_pupils(real_face):
    rgb, face = real_face
    h, w = rgb.shape[:2]
    hint = face_hint.draw_hint((h, w), [(face.kps, face.landmarks)], "openpose_face")
    assert hint.shape == (h, w, 3) and hint.dtype == np.uint8
    pts = face_hint.openpose_points(face.landmarks)
    assert pts.shape == (70, 2)
    for x, y in np.rint(pts).astype(int):
        assert hint[y, x].min() >= 200, (x, y)            # white dot centred on the point
    assert np.allclose(pts[68], face.landmarks[36:42].mean(0))
    lit = hint.max(-1) > 0
    assert lit.mean() < 0.2                                # dots on black, not a filled face
    assert (hint[..., 0] == hint[..., 1]).all() and (hint[..., 1] == hint[..., 2]).all()   # white only
    far = np.ones_like(lit)
    for x, y in np.rint(pts).astype(int):
        far[max(0, y - 8):y + 9, max(0, x - 8):x + 9] = False
    assert not lit[far].any()                              # nothing drawn away from the points


def test_68_point_contours_follow_the_face(real_face):
    rgb, face = real_face
    h, w = rgb.shape[:2]
    hint = face_hint.draw_hint((h, w), [(face.kps, face.landmarks)], "68_point")
    lm = face.landmarks
    # the midpoint of each jaw segment lies on a drawn line
    for a in range(16):
        x, y = np.rint((lm[a] + lm[a + 1]) / 2).astype(int)
        assert hint[y - 1:y + 2, x - 1:x + 2].max() > 100, a
    # eyes and lips are closed rings: their interiors stay dark
    eye_centre = np.rint(lm[36:42].mean(0)).astype(int)
    assert hint[eye_centre[1], eye_centre[0]].max() < 50
    assert _blobs(hint.max(-1) > 0) <= 9                   # one blob per contour at most


def test_5_point_colours_and_limbs():
    kps = np.array([[180, 200], [330, 200], [256, 280], [200, 360], [310, 360]], np.float32)
    hint = face_hint.draw_hint((512, 512), [(kps, None)], "5_point")
    for (x, y), colour in zip(kps.astype(int), face_hint.KPS_COLORS):
        assert tuple(hint[y, x]) == colour
    # limb from the left eye to the nose, away from both discs: 60 % of red
    x, y = np.rint(kps[0] * 0.5 + kps[2] * 0.5).astype(int)
    assert hint[y, x, 0] == pytest.approx(153, abs=2) and hint[y, x, 1:].max() == 0


def test_sub_pixel_motion_changes_the_hint():
    kps = np.array([[180, 200], [330, 200], [256, 280], [200, 360], [310, 360]], np.float32)
    a = face_hint.draw_hint((512, 512), [(kps, None)], "5_point")
    b = face_hint.draw_hint((512, 512), [(kps + 0.3, None)], "5_point")
    assert not np.array_equal(a, b)                        # no snapping to whole pixels


def test_68_formats_need_landmarks():
    kps = np.array([[180, 200], [330, 200], [256, 280], [200, 360], [310, 360]], np.float32)
    for fmt in ("openpose_face", "68_point"):
        with pytest.raises(face_hint.HintError, match="68-point landmarks"):
            face_hint.draw_hint((512, 512), [(kps, None)], fmt)
    with pytest.raises(face_hint.HintError, match="unknown hint format"):
        face_hint.draw_hint((64, 64), [], "canny")


def test_crop_space_hint_lands_on_the_aligned_template(real_face):
    _, face = real_face
    m = estimate_norm(face.kps, 512)
    kps = transform_points(face.kps, m)
    assert np.abs(kps - template(512)).max() < 512 * 0.05   # aligned keypoints sit on the template
    lm = transform_points(face.landmarks, m)
    hint = face_hint.draw_hint((512, 512), [(kps, lm)], "openpose_face")
    for x, y in np.rint(lm).astype(int):
        assert hint[y, x].min() >= 200


def test_face_region_mask_covers_the_face_only(real_face):
    rgb, face = real_face
    h, w = rgb.shape[:2]
    mask = face_hint.face_region_mask((h, w), [face.landmarks], grow=0.25)
    assert mask.dtype == np.float32 and 0 <= mask.min() and mask.max() <= 1
    cx, cy = np.rint(face.landmarks.mean(0)).astype(int)
    assert mask[cy, cx] == pytest.approx(1.0, abs=1e-3)
    assert mask[0, 0] == 0 and mask[-1, -1] == 0
    bigger = face_hint.face_region_mask((h, w), [face.landmarks], grow=0.6)
    assert bigger.sum() > mask.sum() * 1.3
    soft = (mask > 0.02) & (mask < 0.98)
    assert soft.any()                                      # feathered edge, not a hard cut


def test_schedule_maps_execution_order_to_output_residuals():
    s = BlockSchedule(middle=1.0, output=(0.7, 0.5), rest=1.0)
    n = 12                                                 # SD1.5: twelve input-block residuals
    # the UNet's output blocks pop from the end: block 0 takes output[11], block 1 output[10]
    assert s.factor("output", 11, n) == 0.7
    assert s.factor("output", 10, n) == 0.5
    assert [s.factor("output", i, n) for i in range(10)] == [1.0] * 10
    assert s.factor("middle", 0, 1) == 1.0
    assert BlockSchedule(middle=0.3).factor("middle", 0, 1) == 0.3
    assert s.factor("input", 0, 4) == 1.0


def test_apply_schedule_scales_masks_and_never_writes_in_place():
    g = torch.Generator().manual_seed(0)
    shared = torch.randn(2, 4, 8, 8, generator=g)
    control = {"middle": [torch.randn(2, 8, 2, 2, generator=g)],
               "output": [shared, shared, torch.randn(2, 8, 4, 4, generator=g)], "input": []}
    before = {k: [t.clone() for t in v] for k, v in control.items()}
    mask = torch.zeros(1, 64, 64)
    mask[:, :, :32] = 1.0                                   # left half of the image
    out = apply_schedule(control, BlockSchedule(middle=0.9, output=(0.7, 0.5), rest=1.0), mask, batched_number=2)
    for k in control:
        for a, b in zip(control[k], before[k]):
            assert torch.equal(a, b)                       # inputs untouched (shared tensors stay valid)
    last = out["output"][2]
    assert torch.allclose(last[..., :2], 0.7 * control["output"][2][..., :2])
    assert (last[..., 2:] == 0).all()
    assert torch.allclose(out["output"][1][..., :4], 0.5 * shared[..., :4])
    assert torch.allclose(out["output"][0][..., :4], shared[..., :4])
    assert torch.allclose(out["middle"][0][..., :1], 0.9 * control["middle"][0][..., :1])
    assert out["input"] == []


def test_masks_follow_the_sampler_batch_layout():
    m = torch.arange(3, dtype=torch.float32).view(3, 1, 1, 1)
    # cond + uncond of 3 latents each: masks repeat per group, in latent order
    assert match_batch(m, 6, 2).flatten().tolist() == [0, 1, 2, 0, 1, 2]
    assert match_batch(m, 3, 1).flatten().tolist() == [0, 1, 2]
    assert match_batch(m[:1], 6, 2).shape[0] == 1           # one mask broadcasts
    soft = torch.zeros(1, 16, 16)
    soft[:, :, :8] = 1
    r = resize_mask(soft, (4, 4))
    assert r.shape == (1, 1, 4, 4) and r[0, 0, :, :2].eq(1).all() and r[0, 0, :, 2:].eq(0).all()
    up = resize_mask(soft, (32, 32))
    assert up.shape == (1, 1, 32, 32) and 0 < up[0, 0, 0, 15] < 1


def test_overlay_images_keeps_timing_audio_and_untouched_pixels(tmp_path):
    from swapline_core.video import stages as pipeline
    from swapline_core.video.frames import FrameSequence

    clip = SAMPLE.parent / "kling_avatar_clip.mp4"
    seq = FrameSequence.open(str(clip), start=3, count=10, chunk=4)
    frames = [f for _, chunk in seq.iter_chunks() for f in chunk]
    edited = [f.copy() for f in frames]
    edited[5][100:140, 120:180] = (10, 200, 30)
    out = pipeline.overlay_images(seq, edited, str(tmp_path), pipeline.Hooks())
    assert (out.fps, out.has_audio, out.start, out.count, out.path) == (seq.fps, seq.has_audio, 3, 10, seq.path)
    back = [f for _, chunk in out.iter_chunks() for f in chunk]
    assert all(np.array_equal(a, b) for a, b in zip(back, edited))
    again = pipeline.overlay_images(seq, edited, str(tmp_path), pipeline.Hooks())
    assert again.key == out.key and again.key != seq.key        # same edit, same stored layer
    with pytest.raises(ValueError, match="9 images for a sequence of 10 frames"):
        pipeline.overlay_images(seq, edited[:9], str(tmp_path), pipeline.Hooks())
    with pytest.raises(ValueError, match="resize the images back"):
        pipeline.overlay_images(seq, [f[:-2] for f in edited], str(tmp_path), pipeline.Hooks())
