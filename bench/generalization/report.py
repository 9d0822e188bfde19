"""Before/after strips and docs/measurements/generalization.md of the generalization section."""
from __future__ import annotations

import re
from pathlib import Path

import cv2
import numpy as np

from ..paths import REPO
from ..section import f as _f
from ..section import table as _table

LABEL_H = 18
MAX_W = 1400


def _label(width: int, text: str) -> np.ndarray:
    band = np.full((LABEL_H, width, 3), 255, np.uint8)
    cv2.putText(band, text, (4, LABEL_H - 5), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (0, 0, 0), 1, cv2.LINE_AA)
    return band


def zoom_box(boxes, shape, scale: float = 2.2) -> tuple[int, int, int, int] | None:
    """A square around a frame's tracked face boxes (scale x their extent), inside the frame."""
    if not boxes:
        return None
    b = np.asarray(boxes, np.float32).reshape(-1, 4)
    x0, y0, x1, y1 = b[:, 0].min(), b[:, 1].min(), b[:, 2].max(), b[:, 3].max()
    h, w = shape[:2]
    side = int(min(max(x1 - x0, y1 - y0) * scale, h, w))
    x = int(np.clip((x0 + x1) / 2 - side / 2, 0, w - side))
    y = int(np.clip((y0 + y1) / 2 - side / 2, 0, h - side))
    return x, y, side, side


def _zoomed(frames, boxes) -> np.ndarray:
    tiles = []
    for f, z in zip(frames, boxes):
        h, w = f.shape[:2]
        x, y, bw, bh = z or (0, 0, w, h)
        tiles.append(cv2.resize(f[y:y + bh, x:x + bw], (w, h), interpolation=cv2.INTER_CUBIC))
    return np.concatenate(tiles, 1)


def strip(path: Path, title: str, inputs: list[np.ndarray], outputs: list[tuple[str, list]], picks,
          zooms=None) -> Path:
    """Input frames on top, then (``zooms``: a box per pick around the tracked faces) the input's
    faces enlarged, then one row of delivered frames (enlarged the same way) per source, labelled."""
    top = np.concatenate(inputs, 1)
    zooms = zooms if zooms is not None else [None] * len(inputs)
    rows = [_label(top.shape[1], f"{title}: input, frames {', '.join(map(str, picks))}"), top]
    if any(zooms):
        rows += [_label(top.shape[1], "input, tracked faces enlarged"), _zoomed(inputs, zooms)]
    for name, frames in outputs:
        rows += [_label(top.shape[1], f"delivered, source {name}" + (", enlarged" if any(zooms) else "")),
                 _zoomed(frames, zooms)]
    img = np.concatenate(rows, 0)
    if img.shape[1] > MAX_W:
        s = MAX_W / img.shape[1]
        img = cv2.resize(img, (MAX_W, int(img.shape[0] * s)), interpolation=cv2.INTER_AREA)
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), cv2.cvtColor(img, cv2.COLOR_RGB2BGR))
    return path


def _reasons(d: dict, n: int = 3) -> str:
    items = list(d.items())
    more = f" +{len(items) - n}" if len(items) > n else ""
    return ", ".join(f"{k} {v:.2f}" for k, v in items[:n]) + more if items else "none"


COLUMNS = ("clip", "source", "pairs (eligible)", "yield", "refused", "refused by reason", "QA-failed",
           "QA-failed by reason", "bridged", "kept original (segment)", "identity_switches", "mouth_open_corr",
           "detail_ratio", "forehead_step", "off-face frames", "toward_source", "moved_to_source",
           "d(res,src) / d(res,tgt) / d(tgt,src)")


def _cells(clip: str, src: str, r: dict) -> list[str]:
    d = r.get("identity_distances")
    return [clip, src, f"{r['tracked_pairs']} ({r['eligible_pairs']})", _f(r["yield"]), _f(r["refused"]),
            _reasons(r["refused_by_reason"]), _f(r["qa_failed"]), _reasons(r["qa_failed_by_reason"]),
            _f(r.get("bridged")) + (f" ({_reasons(r['bridged_by_reason'])})" if r.get("bridged_by_reason") else ""),
            _f(r.get("reverted_other_face")), str(r["identity_switches"]),
            _f(r["mouth_open_corr"]) + ("" if r.get("mouth_moves") else " (static mouth)"), _f(r.get("detail_ratio")),
            _f(r.get("forehead_step")),
            f"{r['off_face_frames']}" + (f" ({r['off_face_unjudged']} not judged)" if r["off_face_unjudged"] else ""),
            _f(r["toward_source"]), _f(r["moved_to_source"]),
            " / ".join(f"{v:.3f}" for v in d) if d else "n/a"]


def markdown(g: dict) -> list[str]:
    s = g["summary"]
    lines = [f"Median over the {s['runs']} clip x source runs: **yield {_f(s['yield'])}**, identity_switches "
             f"{_f(s['identity_switches'])} per run ({s['identity_switches_total']} in all), mouth_open_corr "
             f"{_f(s['mouth_open_corr'])} (the {s.get('mouth_runs')} runs whose target mouth moves), "
             f"toward_source {_f(s['toward_source'])}, moved_to_source "
             f"{_f(s['moved_to_source'])}, detail_ratio {_f(s.get('detail_ratio'))} (worst run "
             f"{_f(s.get('detail_ratio_min'))}), forehead_step {_f(s.get('forehead_step'))} (worst run "
             f"{_f(s.get('forehead_step_max'))}); off-face paste frames in all runs: {s['off_face_frames_total']}; "
             f"occluder pixels kept, worst shape: {_f(s['occluder_kept_min'])} over all frames, "
             f"{_f(s.get('occluder_kept_on_swapped_min'))} over the frames delivered swapped.", ""]
    worst = sorted(s["per_clip"].items(), key=lambda kv: (kv[1]["yield"] is None, kv[1]["yield"] or 0))
    lines += ["## Per clip (medians over the sources)", "",
              *_table(("clip", "what it shows", "median yield", "median identity_switches"),
                      [[c, g["clips"].get(c, ""), _f(v["yield"]), _f(v["identity_switches"], 1)] for c, v in worst]),
              "", "## Per source (medians over the clips)", "",
              *_table(("source", "median yield", "median toward_source", "median detail_ratio", "origin"),
                      [[n, _f(v["yield"]), _f(v["toward_source"]), _f(v.get("detail_ratio")), g["sources"].get(n, "")]
                       for n, v in s["per_source"].items()]),
              "", "## Every run", "",
              *_table(COLUMNS, [_cells(c, n, r) for c, per in g["runs"].items() for n, r in per.items()])]
    if g.get("occluders"):
        lines += ["", f"## Known-truth occluders over the eyes ({g['occluder_clip']}, source {g['occluder_source']})",
                  "", *_table(("occluder", "frames with it", "kept (all frames)", "kept (delivered swapped frames)",
                               "yield", "QA-failed by reason", "refused by reason"),
                              [[k, str(r["occluder_frames"]), _f(r["occluder_kept"]), _f(r["occluder_kept_on_swapped"]),
                                _f(r["yield"]), _reasons(r["qa_failed_by_reason"]), _reasons(r["refused_by_reason"])]
                               for k, r in g["occluders"].items()])]
    return lines + ["", "## Method", "", METHOD.format(frames=g["frames_per_clip"], occl=g.get("occluder_clip")), "",
                    f"Section wall time {g['seconds']:.0f} s; load average at end {g.get('load_average_at_end')}."]


METHOD = (
    "How each number is made (`bench/generalization/`):\n\n"
    "- Pipeline: `workflows/api/video_swap_builtin.json` unchanged (built-in analyzer, classical swapper, guards on, "
    "QA gate policy *keep original*, C2PA sink) on a real ComfyUI server over HTTP, one prompt per clip x source, "
    "its inputs pointed at the run's files: the clip's first {frames} frames (loader `count`), the source photo, and "
    "as target reference the scorer's largest face of those frames cropped by the shipped sources' crop rule. The "
    "bench adds Frames to IMAGE -> Save Image after the gate to read the delivered frames losslessly.\n"
    "- `yield`: delivered swapped and passing the gate / tracked (frame, face) pairs with the tracked box >= 40 px "
    "tall and |yaw| <= 45 deg (the pipeline's head pose on the tracked five points). A pair is *refused* when the "
    "swap stage refused it (reason: the refusal's category), *QA-failed* when the gate failed it (its reasons without "
    "their numbers; a pair may have several) and its frame was reverted, *bridged* when it failed the gate just past a "
    "limit but its shot segment stayed swapped (delivered; the QA policy decides per shot, docs/qa.md; the reasons "
    "it failed on follow its share), and *kept "
    "original (segment)* when it passed but its frame was reverted with its shot segment (or another face's).\n"
    "- `identity_switches`: frames where a track's delivered state (swapped / original) differs from the track's "
    "previous frame inside one shot (between the tracker's cuts), all tracked pairs.\n"
    "- Scorer (`bench/quality/score.py`: dlib HOG + 68 points + ResNet embedding; the pipeline detects with MTCNN), "
    "on frames whose tracked face was delivered swapped, matched to the scorer's face there (IoU > 0.3): "
    "`mouth_open_corr` = correlation of the input's and the delivered inner-lip opening (\"static mouth\": the "
    "input's opening spans < 0.08 inter-ocular distances there from its 10th to its 90th percentile, a correlation "
    "of noise, left out of the median; the percentiles, not the extremes, so one landmark misfit on a closed mouth "
    "does not count as speech); "
    "`detail_ratio` = median over those frames of the delivered face's fine detail over the input's, at the "
    "input's 68 points (mean absolute Laplacian of grey inside their hull shrunk by a tenth; 1: as detailed, "
    "below: smeared, no target yet: a small source's upscaled face reads low); "
    "`forehead_step` = median over those frames of the sharpest brightness step on the delivered forehead over the "
    "input's (98th percentile of the grey gradient, smoothed over 1 % of the face, in the band 0.06-0.25 of the "
    "brow-to-chin height above the input's brows, between the brows' peaks; the input's floored at 1 grey level per "
    "pixel): 1 as smooth as the input, above 1 a patchwork forehead such as the target's lit skin showing where the "
    "source's hair was cut out (no target yet: a reading of a defect seen on the strips, not a gate); "
    "`toward_source` = frontal "
    "frames where d(result, source) < d(target, source); `moved_to_source` = d(result, source) < d(result, target). "
    "`off-face frames`: frames whose change (> 8/255) outside every scorer face box (+ forehead, + 10 %; a frame "
    "without a scorer face borrows boxes from one <= 8 frames away, else it is not judged) exceeds 1 % of the box.\n"
    "- Occluders: each shape drawn over the eyes from the scorer's 68 points of every frame of {occl} (exact masks), "
    "run with the shipped colour source; kept = occluder pixels changed by <= 8/255, over all frames and over the "
    "frames delivered swapped (reverted frames keep the occluder trivially).")


PUBLISH_CLIP = "api_happyhorse1_1_t2v-1"    # frontal, one face: every source's result is visible
PUBLISHED = REPO / "docs" / "images" / "devset_strip.jpg"
PUBLISH_W = 1000


def publish(g: dict, strips: Path, page: Path = REPO / "README.md") -> Path:
    """The README's development-set picture: ``PUBLISH_CLIP``'s strip of this run (input over every
    source's delivered frames) as a JPEG, and its caption naming the run's commit and date."""
    from PIL import Image

    from devtools.captions import set_caption

    src = Path(strips) / f"{PUBLISH_CLIP}.png"
    if g.get("smoke") or not src.is_file():
        raise ValueError(f"no full-run strip {src}: run python -m bench.generalization --doc first")
    im = Image.open(src).convert("RGB")
    im = im.resize((PUBLISH_W, round(im.height * PUBLISH_W / im.width)), Image.LANCZOS)
    PUBLISHED.parent.mkdir(parents=True, exist_ok=True)
    im.save(PUBLISHED, quality=85, optimize=True)
    link = PUBLISHED.relative_to(REPO).as_posix()
    text = page.read_text()
    if f"]({link})" not in text:
        # first publication: the picture goes under the page's first picture and its caption
        first = re.search(r"!\[[^\]]*\]\([^)]*\)\n\n?_[^\n]*_\n", text)
        if first is None:
            raise ValueError(f"{page} has no picture with a caption to put {link} under")
        block = (f"\n![A development-set clip (the set the project is tuned on): input, then the delivered frames with "
                 f"each source photo]({link})\n\n_caption_\n")
        page.write_text(text[:first.end()] + block + text[first.end():])
    m, runs = g["machine"], g["runs"].get(PUBLISH_CLIP, {})
    dirty = " with uncommitted changes" if m.get("git_dirty") else ""
    yields = ", ".join(f"{s} {_f(r.get('yield'), 2)}" for s, r in runs.items())
    set_caption(page, link,
                f"A development-set clip, from the set the project is tuned on ({PUBLISH_CLIP}, first "
                f"{g['frames_per_clip']} frames): input, then what the shipped workflow delivered with each source "
                f"photo (`python -m bench.generalization --doc`, commit {m.get('git_commit')}{dirty}, "
                f"{g['run']['date']}; yield per source: {yields}). Every clip and source: "
                "[docs/measurements/generalization.md](docs/measurements/generalization.md); what the QA gate "
                "does not see yet, such as a small source photo's soft face: "
                "[docs/quality.md](docs/quality.md#what-the-built-in-swap-does)")
    return PUBLISHED
