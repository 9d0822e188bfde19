"""Re-measure the classical swapper's calibration table and its expression transfer.

Writes docs/measurements/classical_swap.md (command, date, machine, tables). Two measurements:

1. Identity (insightface's t1.jpg, six faces, Tom Hanks as the source): dlib identity distance
   of each swapped face to the source and to the original target; margin = to_target -
   to_source (min / mean over the six faces; > 0: nearer the source). Faces are re-detected on
   the output, as in tests/unit/backends/test_builtin.py.
2. Expression (the sample clips in tests/.cache/media): dlib 68-point landmarks on each target
   frame and on the swapped frame; Pearson correlation over frames of the inner-lip gap (mean of
   61-67, 62-66, 63-65) and of the eye opening (mean lid distances), both in pixels. Sources:
   Tom Hanks (a 112 px grey crop) and the target person's own closed-mouth frame (so any
   opening in the result must come from the target's expression).
3. Sensitivity of (2) on the kling clip: the same correlations with the patch margin (how far
   the swapped patch extends around the face: the crop the colour transfer, relight and Poisson
   clone see, not the geometry) at 0.08-0.20. The eye opening is ~8 px on this clip and dlib's
   reading of it on a warped eye is noisy: single values move by up to +-0.1 with the margin,
   so compare means.

Run: OMP_NUM_THREADS=2 .venv/bin/python -m calibration.calibrate_classical
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CLIPS = REPO / "tests" / ".cache" / "media"

VARIANTS = [
    ("defaults", {}),
    ("source expression (`expression=False`, the old behaviour)", {"expression": False}),
    ("no forehead band (`forehead=0`)", {"forehead": 0.0}),
    ("no source proportions (`shape_transfer=0`)", {"shape_transfer": 0.0}),
    ("no mirroring (`mirror=\"never\"`)", {"mirror": "never"}),
    ("`blend=\"feather\"`", {"blend": "feather"}),
]


def mouth_gap(lm: np.ndarray) -> float:
    return float(np.mean([np.linalg.norm(lm[a] - lm[b]) for a, b in ((61, 67), (62, 66), (63, 65))]))


def eye_gap(lm: np.ndarray) -> float:
    return float(np.mean([np.linalg.norm(lm[a] - lm[b]) for a, b in ((37, 41), (38, 40), (43, 47), (44, 46))]))


def paste(frame, patches):
    from swapline_core.faces.paste import apply_patches

    return apply_patches(frame, patches) if patches else frame


def identity_margins(an, swapper, t1, t1_faces, source) -> tuple[float, float]:
    from swapline_core.backends.builtin_analyzer import distance

    out = paste(t1, swapper.swap([t1], [t1_faces], source)[0])
    found = an.detect([out])[0]
    matches = [max(found, key=lambda g: _iou(g.bbox, f.bbox)) for f in t1_faces]
    an.embed([out], [matches])
    m = np.array([float(distance(g.embedding, f.embedding)) - float(distance(g.embedding, source.embedding))
                  for f, g in zip(t1_faces, matches)])
    return float(m.min()), float(m.mean())


def expression_corr(an, swapper, frames, faces, source, track: int = 0) -> tuple[float, float, int]:
    """Correlations (mouth, eyes) over the frames holding the clip's main face (the largest)."""
    tm, rm, te, re_ = [], [], [], []
    for frame, fs in zip(frames, faces):
        if not fs:
            continue
        f = max(fs, key=lambda x: x.area)
        out = paste(frame, swapper.swap([frame], [[f]], source)[0])
        g = f.copy(landmarks=None)
        an.landmarks68([out], [[g]])
        tm.append(mouth_gap(f.landmarks))
        rm.append(mouth_gap(g.landmarks))
        te.append(eye_gap(f.landmarks))
        re_.append(eye_gap(g.landmarks))
    return float(np.corrcoef(tm, rm)[0, 1]), float(np.corrcoef(te, re_)[0, 1]), len(tm)


def _iou(a, b) -> float:
    x1, y1, x2, y2 = max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, x2 - x1) * max(0.0, y2 - y1)
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def load():
    from devtools.media import HANKS, T1, insightface_image, rgb
    from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
    from swapline_core.types import SourceIdentity
    from swapline_core.video.read import iter_frames

    an = BuiltinAnalyzer()
    t1 = rgb(insightface_image(T1))
    t1_faces = an.detect([t1])[0]
    an.landmarks68([t1], [t1_faces])
    an.embed([t1], [t1_faces])
    hanks = rgb(insightface_image(HANKS))
    hf = an.detect([hanks])[0][0]
    an.embed([hanks], [[hf]])
    hanks_src = SourceIdentity(hf.embedding, an.recognizer_name, hanks, hf)
    clips = {}
    for clip in sorted(CLIPS.glob("*.webp")):
        frames = [f for _, f in iter_frames(clip)]
        faces = an.detect(frames)
        an.landmarks68(frames, faces)
        clips[clip.name] = (frames, faces)
    return an, t1, t1_faces, hanks_src, clips


def self_source(an, frames, faces):
    """The clip's own person from its most closed-mouth frame."""
    from swapline_core.types import SourceIdentity

    best = min((i for i, fs in enumerate(faces) if len(fs) == 1),
               key=lambda i: mouth_gap(max(faces[i], key=lambda x: x.area).landmarks))
    f = max(faces[best], key=lambda x: x.area)
    return SourceIdentity(np.zeros(128, np.float32), an.recognizer_name, frames[best], f), best


def main() -> None:
    import argparse

    # No options: --help only says what it does (a run takes minutes; it rewrites classical_swap.md).
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    from swapline_core.backends.classical import ClassicalSwapper

    t0 = time.time()
    an, t1, t1_faces, hanks_src, clips = load()
    ident = []
    for label, kw in VARIANTS:
        lo, mean = identity_margins(an, ClassicalSwapper(**kw), t1, t1_faces, hanks_src)
        ident.append((label, lo, mean))
        print(f"identity {label}: {lo:.3f} / {mean:.3f}", flush=True)
    expr = []
    for name, (frames, faces) in clips.items():
        own, own_idx = self_source(an, frames, faces)
        for src_label, src in (("Tom Hanks", hanks_src), (f"own frame {own_idx}", own)):
            for label, kw in VARIANTS[:2]:
                mc, ec, n = expression_corr(an, ClassicalSwapper(**kw), frames, faces, src)
                expr.append((name, src_label, label, mc, ec, n))
                print(f"expression {name} {src_label} {label}: mouth {mc:.2f} eyes {ec:.2f} ({n} frames)", flush=True)
    sens = sensitivity_rows(an, clips, hanks_src)
    comp = competence_rows(an, t1, t1_faces, clips)
    write(ident, expr, sens, comp, time.time() - t0)


MARGINS = (0.08, 0.10, 0.12, 0.16, 0.20)


def sensitivity_rows(an, clips, hanks_src, clip: str = "api_kling_avatar2-1.webp"):
    """Per source: (mouth, eye) correlations at each patch margin (defaults otherwise)."""
    from swapline_core.backends.classical import ClassicalSwapper

    if clip not in clips:
        return []
    frames, faces = clips[clip]
    own, own_idx = self_source(an, frames, faces)
    rows = []
    for src_label, src in (("Tom Hanks", hanks_src), (f"own frame {own_idx}", own)):
        vals = [expression_corr(an, ClassicalSwapper(margin=m), frames, faces, src)[:2] for m in MARGINS]
        rows.append((clip, src_label, np.array(vals)))
        print(f"sensitivity {clip} {src_label}: {np.round(vals, 2).tolist()}", flush=True)
    return rows


def competence_rows(an, t1, t1_faces, clips):
    """Per image set: head-pose readings (five points / 68 points) and what the guards decide."""
    from collections import Counter

    from swapline_core.backends.classical import ClassicalSwapper
    from swapline_core.guards import GuardOptions, reason_category, screen
    from swapline_core.guards.competence import pose_of
    from swapline_core.guards.pose import five_from_68, head_pose

    rows = []
    sets = [("t1.jpg", [t1], [t1_faces])] + [(n, fr, fs) for n, (fr, fs) in clips.items()]
    for name, frames, faces in sets:
        flat = [f for fs in faces for f in fs]
        y5 = [abs(head_pose(f.kps)[0]) for f in flat]
        y68 = [abs(head_pose(five_from_68(f.landmarks))[0]) for f in flat]
        pitch = [pose_of(f)[1] for f in flat]
        verdicts = screen(ClassicalSwapper(), frames, faces, GuardOptions())
        counts = Counter("swapped" if v is None else reason_category(v) for row in verdicts for v in row)
        rows.append((name, len(flat), (min(y5), max(y5)), (min(y68), max(y68)), max(pitch), dict(counts)))
        print(f"competence {name}: {rows[-1]}", flush=True)
    return rows


def write(ident, expr, sens, comp, seconds: float) -> None:
    from bench.section import write_lines

    lines = [f"Run time {seconds:.0f} s.", "",
             "## Identity on t1.jpg (source: Tom Hanks)", "",
             "Margin = dlib distance to the original target - distance to the source, over the six faces.", "",
             "| variant | min margin | mean margin |", "|---|---|---|"]
    lines += [f"| {label} | {lo:.3f} | {mean:.3f} |" for label, lo, mean in ident]
    lines += ["", "## Expression follows the target (dlib 68 points on input and output)", "",
              "Pearson correlation over the clip's frames (the largest face per frame).", "",
              "| clip | source | variant | mouth opening | eye opening | frames |", "|---|---|---|---|---|---|"]
    lines += [f"| {c} | {s} | {v} | {m:.2f} | {e:.2f} | {n} |" for c, s, v, m, e, n in expr]
    lines += ["", "The infinitetalk rows are for completeness only: its faces are a three-quarter view and a",
              "profile, 45 px tall, which the guards refuse for this swapper (below).", "",
              "## Sensitivity: the same correlations at patch margins " + ", ".join(f"{m:.2f}" for m in MARGINS), "",
              ("The margin only changes the crop around the face that the colour transfer, relight and "
               "Poisson clone see (the default is 0.12); the spread is the noise of a single value above."), "",
              "| clip | source | mouth opening mean (min-max) | eye opening mean (min-max) |", "|---|---|---|---|"]
    lines += [f"| {c} | {s} | {v[:, 0].mean():.2f} ({v[:, 0].min():.2f}-{v[:, 0].max():.2f}) | "
              f"{v[:, 1].mean():.2f} ({v[:, 1].min():.2f}-{v[:, 1].max():.2f}) |" for c, s, v in sens]
    lines += ["",
              "## Where the swapper works (competence)", "",
              ("|yaw| in degrees from the five detector points and from the 68 landmarks "
               "(`swapline_core.guards.pose`), the larger |pitch| of the two, and the guards' verdicts "
               "with the classical swapper's declared limits."), "",
              "| images | faces | yaw (5 pt) | yaw (68 pt) | max pitch | guards |", "|---|---|---|---|---|---|"]
    lines += [f"| {n} | {k} | {a[0]:.0f}-{a[1]:.0f} | {b[0]:.0f}-{b[1]:.0f} | {p:.0f} | "
              + ", ".join(f"{c}: {v}" for c, v in sorted(cnt.items())) + " |" for n, k, a, b, p, cnt in comp]
    print("wrote " + write_lines("classical_swap", "Classical swapper: calibration and expression transfer",
                                 "Measured by `calibration/calibrate_classical.py` (docstring there says exactly how).",
                                 "OMP_NUM_THREADS=2 .venv/bin/python -m calibration.calibrate_classical", lines))


if __name__ == "__main__":
    main()
