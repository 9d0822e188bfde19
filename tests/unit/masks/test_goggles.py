"""A light cyan goggle band drawn over the eyes (issue 30's synthetic case): the face around it is
still swapped, not cut away with it.

Whether the band itself is kept is no longer asserted. The rule that kept it (skin samples of a
colour skin never has were not fitted as a skin tone: the band covers the upper cheeks and the
nose bridge where the samples are taken) moved no paste mask of any face labelled by eye
(docs/measurements/occluder_rules.md), so it was removed (issue 49 item 4: a rule no labelled face
needs goes). Without it 45.6 % of the band's pixels are kept (100 % with it, 2026-12-06): the
synthetic goggles case is not covered; docs/quality.md says so. The share is printed, not judged.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from ltx_swap import LTX, SOURCE  # noqa: E402
from occluders import goggles  # noqa: E402
from PIL import Image  # noqa: E402

TOL = 8
SAMPLE = ROOT / "assets" / "samples" / "kling_avatar_clip.mp4"    # the shipped sample: its red glasses under the band


@pytest.fixture(scope="module")
def swapped_under_goggles(tmp_path_factory):
    """The sample clip's frames 0-5 and the ltx clip's 20-23 with goggles drawn over the eyes, each
    face swapped where it was found on the clean frame (MTCNN misses most faces behind the band;
    the tracker carries them over from the frames around), guards off: the mask stack alone."""
    from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
    from swapline_core.backends.classical import ClassicalSwapper
    from swapline_core.faces import identity as face_model
    from swapline_core.guards import GuardOptions
    from swapline_core.masks import MaskOptions
    from swapline_core.swap.chunk import SwapOptions, swap_chunk
    from swapline_core.video.frames import FrameSequence

    analyzer = BuiltinAnalyzer()
    source = face_model.build_from_images(analyzer, [np.array(Image.open(SOURCE).convert("RGB"))])
    frames, masks, results = [], [], []
    for clip, start, count in ((SAMPLE, 0, 6), (LTX, 20, 4)):
        if not clip.is_file():
            pytest.fail(f"{clip} missing: run scripts/setup.sh (it fetches the sample clips into tests/.cache/media)")
        clean = [f for _, ch in FrameSequence.open(str(clip), start=start, count=count, chunk=count).iter_chunks()
                 for f in ch]
        found = [fs[:1] for fs in analyzer.detect(clean)]
        assert all(found), f"{clip.name}'s frames {start}-{start + count - 1} should each show a face"
        analyzer.landmarks68(clean, found)
        comp = []
        for f, fs in zip(clean, found):
            m, colour = goggles(f.shape, fs[0].landmarks)
            g = f.copy()
            g[m] = colour[m]
            comp.append(g)
            masks.append(m)
        res = swap_chunk(ClassicalSwapper(), analyzer, comp, [[fs[0].copy()] for fs in found], source,
                         SwapOptions(masks=MaskOptions(), guards=GuardOptions(enabled=False)))
        frames += comp
        results += res.frames
    tmp = tmp_path_factory.mktemp("goggles")
    Image.fromarray(np.concatenate([np.concatenate([frames[k], results[k]], 1) for k in (0, 6)], 0)).save(
        tmp / "goggles.png")
    return frames, masks, results


def test_the_face_around_goggles_is_swapped(swapped_under_goggles):
    frames, masks, out = swapped_under_goggles
    tot = keep = 0
    below = []
    for f, m, r in zip(frames, masks, out):
        changed = np.abs(r.astype(np.int16) - f).max(-1) > TOL
        tot += int(m.sum())
        keep += int((m & ~changed).sum())
        below.append(int((changed & ~m).sum()))
    print(f"\n[masks] goggles over the eyes: {keep / tot:.1%} of their pixels kept; pixels swapped around them "
          f"per frame {below}")
    assert min(below) > 200, f"the face around the goggles not swapped: {below}"
