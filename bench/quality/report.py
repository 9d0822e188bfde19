"""The quality section's page body: figures without a target, cases, identity readings."""
from __future__ import annotations

DESCRIPTION = {
    "occluder_pixels_changed": ("share of known occluder pixels altered by > 8/255 over the frames the swap "
                                "changed (opaque bar, sunglasses shape; worst of the two)"),
    "occluder_pixels_changed_skin_hand": ("the same for a skin-coloured hand sliding over the mouth (no target; "
                                          "what a colour model cannot see)"),
    "mouth_open_corr": "correlation of the target's and the result's inner-lip opening over the talking clip",
    "catastrophic_pastes": ("frames (all cases) whose change outside every true face box (+ forehead, + 10 %) "
                            "exceeds 1 % of the box area; frames with any change outside are listed per case"),
    "small_face_coverage": ("frames where the ~25 px face in 1280x720 was swapped (>= 20 % of its lower face "
                            "changed) / frames where it is visible"),
    "moved_to_source": ("frontal frames where the result is nearer the source than the target (dlib embedding; "
                        "no target: issue 30 retired >= 0.9 here, the classical warp's ceiling with the red "
                        "glasses frames kept)"),
    "toward_source": ("frontal frames where the result is nearer the source than the target itself was (no "
                      "target; how often identity moved at all; median distances in the speech case's row)"),
    "moved_to_source_no_glasses": ("moved_to_source on a second talking clip whose face wears no glasses "
                                   "(video_ltx2_3_i2v, face ~75-90 px; no target): the speech case's kept "
                                   "glasses frames weigh on dlib's embedding, this face has none"),
    "toward_source_no_glasses": "toward_source on the same clip (no target)",
    "face_delta_e": "median \u0394E of the face region's mean Lab, result vs target",
    "cut_track_resets": "share of hard cuts found and not spanned by any track",
    "mask_stage_share": ("(masks + guards time) / all the swap stage timed (decode, landmarks, guards, swap, "
                         "masks, paste, store), the same cases; no target"),
}


def markdown(q: dict, targeted=()) -> list[str]:
    from ..section import f, table

    lines = [f"Pipeline: {q['pipeline']}. Scorer: {q['scorer']}.", "", "## Figures without a target", ""]
    lines += table(["figure", "measured", "what it is"],
                   [[k, f(v), DESCRIPTION.get(k, "")] for k, v in q["metrics"].items() if k not in targeted])
    lines += ["", "## Cases", "", "| case | frames | catastrophic | any change off the box (frame: pixels) | "
              "skipped faces (reason: count) | track s | swap s |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, c in q["cases"].items():
        sk = ", ".join(f"{r}: {n}" for r, n in c.get("skipped", {}).items()) or "none"
        off = ", ".join(f"{i}: {n}" for i, n in c.get("off_face_frames", {}).items()) or "none"
        lines.append(f"| {name} | {c['frames']} | {c['catastrophic_pastes']} | {off} | {sk} | "
                     f"{c['seconds']['track']:.1f} | {c['seconds']['swap']:.1f} |")
    for name, suffix in (("speech", ""), ("identity_no_glasses", "_no_glasses")):
        c = q["cases"].get(name, {})
        ids = c.get("identity_distances")
        if ids:
            lines += ["", f"Identity on the {name} case's {c.get('frontal_frames')} frontal frames of "
                      f"{c['frames']} (dlib embedding distances, medians): d(result, source) {ids[0]:.3f}, "
                      f"d(result, target) {ids[1]:.3f}, d(target, source) {ids[2]:.3f}. "
                      f"`moved_to_source{suffix}` counts d(result, source) < d(result, target); "
                      f"`toward_source{suffix}` counts d(result, source) < d(target, source)."
                      + (f" Mouth opening correlation {c['mouth_open_corr']:.3f}, face \u0394E "
                         f"{c['face_delta_e']:.2f} (no targets on this case)."
                         if name != "speech" and c.get("mouth_open_corr") is not None
                         and c.get("face_delta_e") is not None else "")]
    st = q.get("swap_stage_seconds")
    if st:
        lines += ["", "Swap stage seconds, all cases but identity_no_glasses: "
                  + ", ".join(f"{k} {v:.2f}" for k, v in st.items()) + "."]
    lines += ["", "Before/after strips of every case: `out/bench/quality_<case>.png`."]
    return lines
