"""One patch (or one refusal with its reason) per face, whatever the swapper (issue 32, item 1).

A face crossing the frame edge is common in real footage. Every swapper family's stand-in
(devtools/synthetic_swappers.py) and the classical swap run on frames where the leftmost face of
t1.jpg crosses the left edge (or, as a tracked face that left, lies wholly beyond it) and another
face is fully inside: the inside face keeps its own patch and record, the edge face is swapped on
its visible part or refused with "outside the frame", and a swapper that breaks the one-patch-per-
face contract is an error naming it, never a silent misattribution.
"""
from __future__ import annotations

import numpy as np
import pytest

from devtools.media import T1, insightface_image, rgb
from devtools.synthetic_swappers import build_swappers
from swapline_core.backends.classical import ClassicalSwapper
from swapline_core.backends.swappers import FamilySwapper
from swapline_core.errors import SwaplineError
from swapline_core.guards import GuardOptions, Refusals, reason_category
from swapline_core.masks import MaskOptions
from swapline_core.swap.chunk import SwapOptions, swap_chunk
from swapline_core.types import SourceIdentity, l2_normalise

# one stand-in per family (the published file names pick the family)
FAMILIES = ("hyperswap_1a_256", "ghost_1_256", "simswap_256", "simswap_unofficial_512", "blendswap_256",
            "uniface_256", "reswapper_128", "reswapper_256")
# (where the left crop line falls, in widths of the edge face's box from its left side; how much
# further left the edge face's data is moved, in the same widths): half of it in the frame, a
# sliver of it, or a face wholly beyond the edge (a tracked face that has left the frame)
CUTS = {"half": (0.5, 0.0), "sliver": (0.9, 0.0), "gone": (0.5, 3.0)}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return build_swappers(tmp_path_factory.mktemp("swappers"))


@pytest.fixture(scope="module")
def t1():
    """t1.jpg, its faces left to right with 68 points, and a source identity."""
    from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer

    an = BuiltinAnalyzer()
    img = rgb(insightface_image(T1))
    faces = sorted(an.detect([img])[0], key=lambda f: f.bbox[0])
    assert len(faces) >= 2
    an.landmarks68([img], [faces])
    rng = np.random.default_rng(3)
    for f in faces:
        f.embedding = l2_normalise(rng.standard_normal(512).astype(np.float32))
    source = SourceIdentity(l2_normalise(rng.standard_normal(512).astype(np.float32)), "arcface",
                            image=img, face=faces[-1])
    return an, img, faces, source


def _edge_scene(t1, cut: str):
    """The frame cropped on the left through the leftmost face, that face (first) and the next one
    (fully inside), both moved into the cropped frame's coordinates."""
    _an, img, faces, _src = t1
    edge, inside = faces[0], faces[1]
    at, beyond = CUTS[cut]
    width = float(edge.bbox[2] - edge.bbox[0])
    x = int(edge.bbox[0] + at * width)
    assert x < inside.bbox[0] - 5, "the inside face must stay wholly inside"

    def moved(f, dx):
        off = np.array([dx, 0], np.float32)
        return f.copy(bbox=f.bbox - np.array([dx, 0, dx, 0], np.float32), kps=f.kps - off,
                      landmarks=None if f.landmarks is None else f.landmarks - off)

    return np.ascontiguousarray(img[:, x:]), [moved(edge, x + beyond * width), moved(inside, x)]


def _run(swapper, t1, cut):
    an, _img, _faces, source = t1
    frame, faces = _edge_scene(t1, cut)
    # the swapper's own contract is under test: no guard refuses the edge face first
    res = swap_chunk(swapper, an, [frame], [faces], source,
                     SwapOptions(color_match=False, masks=MaskOptions(enabled=False),
                                 guards=GuardOptions(enabled=False)))
    return frame, faces, res


def _check(frame, faces, res, cut):
    edge, inside = faces
    recs = res.records[0]
    assert len(recs) == 2, recs
    assert recs[0]["bbox"] == [round(float(v), 1) for v in edge.bbox]
    assert recs[1]["bbox"] == [round(float(v), 1) for v in inside.bbox]
    # the inside face: swapped, with its own patch over it (not the edge face's)
    assert recs[1]["status"] == "swapped", recs[1]
    cx, cy = (inside.bbox[:2] + inside.bbox[2:]) / 2
    own = [p for p in res.patches[0] if p.region[0] <= cx < p.region[2] and p.region[1] <= cy < p.region[3]]
    assert len(own) == 1 and own[0].mask.any()
    changed = np.any(res.frames[0] != frame, axis=2)
    x0, y0, x1, y1 = (int(v) for v in inside.bbox)
    assert changed[y0:y1, x0:x1].mean() > 0.2, "the inside face was not swapped"
    # the edge face: swapped on its visible part, or refused with the reason
    if recs[0]["status"] == "swapped":
        assert cut != "gone", recs[0]
        assert len(res.patches[0]) == 2
        at_edge = [p for p in res.patches[0] if p is not own[0]][0]
        assert at_edge.region[0] == 0 and at_edge.mask.any()
        ex1 = int(min(edge.bbox[2], frame.shape[1]))
        assert changed[max(int(edge.bbox[1]), 0):int(edge.bbox[3]), 0:ex1].any()
    else:
        assert recs[0]["status"] == "skipped", recs[0]
        assert reason_category(recs[0]["reason"]) == "outside the frame", recs[0]
        assert len(res.patches[0]) == 1, "a refused face has nothing pasted"
    # reports count the refusal under its category, never as "unknown"
    tally = Refusals()
    tally.add(0, res.records)
    assert "unknown" not in tally.count
    return recs[0]["status"]


@pytest.mark.parametrize("cut", sorted(CUTS))
@pytest.mark.parametrize("model", FAMILIES)
def test_edge_face_with_every_family(files, t1, model, cut):
    sw = FamilySwapper(str(files[model]), "CPU")
    frame, faces, res = _run(sw, t1, cut)
    status = _check(frame, faces, res, cut)
    if cut == "half":
        assert status == "swapped", "half a face in the frame is swapped on its visible part"
    if cut == "gone":
        assert res.records[0][0]["family"] == sw.spec.name     # the refusal says which swapper


@pytest.mark.parametrize("cut", sorted(CUTS))
def test_edge_face_classical(t1, cut):
    frame, faces, res = _run(ClassicalSwapper(), t1, cut)
    status = _check(frame, faces, res, cut)
    if cut == "half":
        assert status == "swapped"


class _Dropping:
    """A swapper that drops the first face of each frame, as the trained-swapper runner once did."""
    name = "dropping"
    needs_landmarks = False
    matches_color = False

    def __init__(self, inner):
        self.inner = inner
        self.competence = inner.competence

    def swap(self, images, faces, source):
        return [ps[1:] for ps in self.inner.swap(images, faces, source)]


def test_a_swapper_breaking_the_contract_is_named(files, t1):
    sw = _Dropping(FamilySwapper(str(files["hyperswap_1a_256"]), "CPU"))
    with pytest.raises(SwaplineError, match="dropping swapper broke its contract.*one patch per face"):
        _run(sw, t1, "half")
