"""Run the real video stages on each known-truth case and score the results.

Targets (issue 13, ``SECTION``): occluder_pixels_changed <= 0.02, mouth_open_corr >= 0.8,
catastrophic_pastes == 0, small_face_coverage >= 0.9, face_delta_e <= 6, every cut resets the
tracks. The masks' cost is the speed section's ``mask_ms_per_face_720p``.
moved_to_source (speech case) and its identity_no_glasses reading are
reported without a target: issue 30 retired moved_to_source >= 0.9 on the red-glasses speech case,
whose misses are the classical warp's ceiling with the glasses frames kept.
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

import cv2
import numpy as np

from ..section import Section, Target
from . import cases as qcases
from . import score

TARGETS = {"occluder_pixels_changed": ("<=", 0.02), "mouth_open_corr": (">=", 0.8),
           "catastrophic_pastes": ("<=", 0), "small_face_coverage": (">=", 0.9),
           "face_delta_e": ("<=", 6.0), "cut_track_resets": (">=", 1.0)}
# Cases run and scored but left out of the timing readings (mask_stage_share, swap_stage_seconds),
# so those stay comparable with runs made before the case was added.
UNTIMED = ("identity_no_glasses",)
EXPRESSION = ("speech", "identity_no_glasses")
SWAPPED_SHARE = 0.2     # a small face counts as swapped when >= 20 % of its lower face changed


def _write_pngs(frames, folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for i, f in enumerate(frames):
        cv2.imwrite(str(folder / f"frame_{i:05d}.png"), cv2.cvtColor(f, cv2.COLOR_RGB2BGR))


def run_pipeline(case, analyzer, swapper, source, work: Path) -> dict:
    from swapline_core.video import stages
    from swapline_core.video.frames import FrameSequence

    folder = work / case.name / "in"
    _write_pngs(case.frames, folder)
    store = str(work / case.name / "cache")
    seq = FrameSequence.open(str(folder), chunk=16)
    hooks = stages.Hooks()
    t0 = time.perf_counter()
    faces, track = stages.track_faces(seq, analyzer, store, hooks, mode="largest", max_faces=1,
                                      detect_every=8, max_missing=12, smoothing=0.5)
    t1 = time.perf_counter()
    swapped, swap = stages.swap_frames(seq, faces, source, swapper, analyzer, store, hooks)
    t2 = time.perf_counter()
    inp = [f for _, ch in seq.iter_chunks() for f in ch]
    out = [f for _, ch in swapped.iter_chunks() for f in ch]
    assert len(out) == len(case.frames), "the swap changed the frame count"
    return {"inputs": inp, "outputs": out, "faces": faces, "track": track.to_json(), "swap": swap.to_json(),
            "seconds": {"track": t1 - t0, "swap": t2 - t1}}


CATASTROPHIC_SHARE = 0.01   # off-face change above 1 % of the face box's area: a paste off the face


def off_face(case, res) -> dict:
    """{frame: pixels changed outside every true face box} (boxes include forehead + 10 %)."""
    bad = {}
    for i, (a, b) in enumerate(zip(res["inputs"], res["outputs"])):
        ch = score.changed(a, b)
        for x0, y0, x1, y1 in case.boxes[i]:
            ch[max(0, int(y0)):max(0, int(np.ceil(y1))), max(0, int(x0)):max(0, int(np.ceil(x1)))] = False
        if ch.any():
            bad[i] = int(ch.sum())
    return bad


def catastrophic(case, off: dict) -> dict:
    """The off-face frames whose spill exceeds CATASTROPHIC_SHARE of the face box: a face pasted
    off the face, not a feathered edge a few pixels past the landmark box."""
    out = {}
    for i, n in off.items():
        x0, y0, x1, y1 = case.boxes[i][0]
        if n > CATASTROPHIC_SHARE * max((x1 - x0) * (y1 - y0), 1.0):
            out[i] = n
    return out


def occluder_changed(case, res) -> float | None:
    """Share of occluder pixels altered, over the frames the swap changed: a frame whose face was
    skipped keeps its occluder trivially (None when no frame with an occluder was swapped)."""
    tot = hit = 0
    for m, a, b in zip(case.occluder, res["inputs"], res["outputs"]):
        ch = score.changed(a, b)
        if m is None or not ch.any():
            continue
        tot += int(m.sum())
        hit += int((ch & m).sum())
    return hit / tot if tot else None


def expression(case, res, source_emb) -> dict:
    t_open, r_open, moved, frontal, de, dists = [], [], 0, 0, [], []
    for a, b, l68 in zip(res["inputs"], res["outputs"], case.clean_l68):
        ra, la = score.largest_face(a)
        rb, lb = score.largest_face(b)
        if la is not None and lb is not None:
            t_open.append(score.mouth_open(la))
            r_open.append(score.mouth_open(lb))
        if l68 is not None:
            hull = score.hull_mask(a.shape, l68[:27] if len(l68) else l68)
            de.append(float(np.linalg.norm(score.mean_lab(b, hull) - score.mean_lab(a, hull))))
        if la is not None and score.yaw_ratio(la) < 0.15:
            frontal += 1
            if rb is not None:
                e, et = score.embedding(b, rb), score.embedding(a, ra)
                d = (float(np.linalg.norm(e - source_emb)), float(np.linalg.norm(e - et)),
                     float(np.linalg.norm(et - source_emb)))
                moved += int(d[0] < d[1])
                dists.append(d)
    return {"mouth_open_corr": score.pearson(t_open, r_open), "mouth_frames": len(t_open),
            "target_mouth_range": [round(min(t_open), 3), round(max(t_open), 3)] if t_open else None,
            "moved_to_source": moved / frontal if frontal else None, "frontal_frames": frontal,
            # How far the swap moved identity, for a reading beside the yes/no count: the result
            # nearer the source than the target itself was (toward the source, not past halfway),
            # and the median distances d(result, source), d(result, target), d(target, source).
            "toward_source": float(np.mean([d[0] < d[2] for d in dists])) if dists else None,
            "identity_distances": [round(float(v), 3) for v in np.median(dists, axis=0)] if dists else None,
            "face_delta_e": float(np.median(de)) if de else None,
            "face_delta_e_p90": float(np.percentile(de, 90)) if de else None}


def small_coverage(case, res) -> float:
    """Share of frames whose small face was swapped: >= SWAPPED_SHARE of its lower face changed
    (the hull of the jaw line and the nose tip, from the clean clip's landmarks scaled with it;
    the whole true box where HOG found none). Not the whole box: the box holds the forehead, hair
    and the glasses, which a correct swap keeps as the target's, so keeping the glasses (as the
    occluder test must) read as "not swapped" (measured: 0.95 -> 0.57 when the frames were kept)."""
    swapped = 0
    for i, (a, b) in enumerate(zip(res["inputs"], res["outputs"])):
        ch = score.changed(a, b)
        l68 = case.clean_l68[i] if case.clean_l68 else None
        if l68 is not None:
            ch = ch[score.hull_mask(a.shape, np.concatenate([l68[2:15], l68[30:31]]))]
        else:
            x0, y0, x1, y1 = (int(round(v)) for v in case.boxes[i][0])
            ch = ch[y0:y1, x0:x1]
        swapped += int(ch.size and ch.mean() >= SWAPPED_SHARE)
    return swapped / len(case.frames)


def cut_resets(case, res) -> dict:
    faces = res["faces"]
    found = list(getattr(faces, "cuts", []) or [])
    out = {"true_cuts": case.cuts, "found_cuts": found}
    ok = 0
    for c in case.cuts:
        before = {f.track_id for fr in faces.frames[max(0, c - 8):c] for f in fr.faces}
        after = {f.track_id for fr in faces.frames[c:c + 8] for f in fr.faces}
        ok += int(c in found and not (before & after))
    out["reset_share"] = ok / len(case.cuts) if case.cuts else None
    return out


def stage_seconds(swap_reports: list[dict]) -> dict:
    """Seconds per step of the swap stage, summed over the cases (decode, landmarks, guards, swap,
    masks, paste, store, upscaled)."""
    tot: dict = {}
    for r in swap_reports:
        for k, v in r["seconds"].items():
            tot[k] = tot.get(k, 0.0) + v
    return {k: round(v, 3) for k, v in tot.items()}


def mask_stage_share(swap_reports: list[dict]) -> float | None:
    """(masks + guards) / everything the swap stage timed: the share of Swap Faces in Frames'
    time that the masks and guards take (a second reading, no target)."""
    s = stage_seconds(swap_reports)
    total = sum(s.values())
    return (s.get("masks", 0) + s.get("guards", 0)) / total if total else None


def evaluate(media_dir: Path, work: Path, log=print, frames_limit: int | None = None,
             strip_dir: Path | None = None) -> dict:
    """``strip_dir``: where the before/after strips go (default: beside ``work``)."""
    from bench.cases import builtin_case

    case0 = builtin_case()
    src_img = np.asarray(case0.source.image)
    r, _ = score.largest_face(src_img)
    source_emb = score.embedding(src_img, r)
    results, per_case, swaps = {}, {}, []
    cat_total = 0
    for c in qcases.build(media_dir, frames_limit):
        log(f"quality: {c.name} ({len(c.frames)} frames)")
        res = run_pipeline(c, case0.analyzer, case0.swapper, case0.source, work)
        if c.name not in UNTIMED:
            swaps.append(res["swap"])
        off = off_face(c, res)
        cat = catastrophic(c, off)
        row = {"frames": len(c.frames), "catastrophic_pastes": len(cat), "catastrophic_frames": cat,
               "off_face_frames": off,
               "skipped": res["swap"].get("skipped", {}), "seconds": res["seconds"]}
        cat_total += row["catastrophic_pastes"]
        if c.occluder:
            row["occluder_pixels_changed"] = occluder_changed(c, res)
        if c.name in EXPRESSION:
            row.update(expression(c, res, source_emb))
        if c.name == "small_faces":
            row["small_face_coverage"] = small_coverage(c, res)
        if c.cuts:
            row.update(cut_resets(c, res))
        per_case[c.name] = row
        _strip(work, c, res, strip_dir or work.parent)
    occl = [per_case[n]["occluder_pixels_changed"] for n in ("occluder_bar", "occluder_sunglasses")]
    sp = per_case["speech"]
    results = {
        "occluder_pixels_changed": max((v for v in occl if v is not None), default=None),
        "occluder_pixels_changed_skin_hand": per_case["occluder_skin_hand"]["occluder_pixels_changed"],
        "mouth_open_corr": sp["mouth_open_corr"], "catastrophic_pastes": cat_total,
        "small_face_coverage": per_case["small_faces"]["small_face_coverage"],
        "moved_to_source": sp["moved_to_source"], "toward_source": sp["toward_source"],
        "face_delta_e": sp["face_delta_e"],
        # identity read again on a face without glasses (no target: the target is speech's)
        "moved_to_source_no_glasses": per_case["identity_no_glasses"]["moved_to_source"],
        "toward_source_no_glasses": per_case["identity_no_glasses"]["toward_source"],
        "cut_track_resets": per_case["hard_cut"]["reset_share"],
        "mask_stage_share": mask_stage_share(swaps),
    }
    return {"metrics": results, "cases": per_case, "swap_stage_seconds": stage_seconds(swaps),
            "scorer": "dlib HOG detector + 68-point predictor + ResNet embedding "
            "(the pipeline detects with MTCNN)", "pipeline": "built-in analyzer, classical swapper, "
            "Track Faces (largest, detect every 8) -> Swap Faces in Frames with default options"}


def _strip(work: Path, case, res, strip_dir: Path) -> None:
    """Keep a before/after strip of a few frames for looking at; drop the rest."""
    idx = np.linspace(0, len(case.frames) - 1, 4).astype(int)

    def view(img, i):
        if case.name != "small_faces":
            return img
        # the face is ~25 px: show a 4x-enlarged window around its true box
        x0, y0, x1, y1 = case.boxes[i][0]
        cx, cy, r = (x0 + x1) / 2, (y0 + y1) / 2, max(x1 - x0, y1 - y0) * 1.5
        a, b = int(max(0, cy - r)), int(max(0, cx - r))
        crop = img[a:int(cy + r), b:int(cx + r)]
        return cv2.resize(crop, (256, 256), interpolation=cv2.INTER_NEAREST)

    rows = [np.concatenate([view(res["inputs"][i], i) for i in idx], 1),
            np.concatenate([view(res["outputs"][i], i) for i in idx], 1)]
    strip = np.concatenate(rows, 0)
    if strip.shape[1] > 1600:
        s = 1600 / strip.shape[1]
        strip = cv2.resize(strip, (1600, int(strip.shape[0] * s)), interpolation=cv2.INTER_AREA)
    strip_dir.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(strip_dir / f"quality_{case.name}.png"), cv2.cvtColor(strip, cv2.COLOR_RGB2BGR))
    shutil.rmtree(work / case.name, ignore_errors=True)


def run(frames_limit: int | None, log=print) -> dict:
    from ..paths import OUT, QUALITY_MEDIA, WORK

    # strips to out/bench (WORK is wiped at the end of a bench run)
    return evaluate(QUALITY_MEDIA, WORK / "quality", log=log, strip_dir=OUT, frames_limit=frames_limit)


def _body(q: dict) -> list[str]:
    from .report import markdown

    return markdown(q, TARGETS)


def _targets():
    from .report import DESCRIPTION

    return tuple(Target(k, op, t, DESCRIPTION.get(k, "")) for k, (op, t) in TARGETS.items())


SECTION = Section(
    name="quality", title="Swap quality on known-truth cases: measurements",
    about="The swap a viewer sees, scored by an independent scorer on cases whose truth is known by construction "
          "(`bench/quality/`, method in `bench/README.md`). Before/after strips of each case: "
          "`out/bench/quality_<case>.png` of the same run.",
    run=run, targets=_targets(), figures=lambda q: q["metrics"], body=_body,
    full={"frames_limit": None}, smoke={"frames_limit": 4},
)
