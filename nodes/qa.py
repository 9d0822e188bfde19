"""QA gate node: checks every swapped frame and reports identity, leakage, drift and flicker."""
from __future__ import annotations

import json
import os
from dataclasses import replace

import folder_paths
from comfy_api.latest import io, ui

from ..swapline_core.provenance.hashing import model_manifest
from ..swapline_core.qa import gate as core_qa
from ..swapline_core.qa.plot import plot_report
from ..swapline_core.video import stages as pipeline
from ..swapline_core.video.write import write_image
from . import model_paths
from .convert import check_interrupt, progress
from .types import CATEGORY, Analyzer, FaceModel, Faces, Frames, QAReport

POLICIES = ("flag only", "keep original", "fail job")
AUTO = -1.0
# The measured defaults (QAThresholds) are for the built-in dlib recognizer; ArcFace similarities
# live on another scale (same person ~0.4-0.8, different people < 0.2), so identity and leakage
# limits follow the recognizer unless the user sets them.
ARCFACE_IDENTITY = {"min_identity": 0.2, "max_leakage": 0.6}


def thresholds_for(analyzer, **given) -> core_qa.QAThresholds:
    base = core_qa.QAThresholds()
    if not analyzer.recognizer_name.startswith("dlib"):
        base = replace(base, **ARCFACE_IDENTITY)
    return replace(base, **{k: v for k, v in given.items() if not (isinstance(v, float) and v == AUTO)})


def compact_frames(report: dict) -> list[dict]:
    """Per frame, the worst face's numbers: what the editor's chart needs (the JSON has it all)."""
    out = []
    for rec in report["frames"]:
        faces = rec.get("faces") or []
        ident = [f["identity"] for f in faces if f.get("identity") is not None]
        flick = [f["flicker_ratio"] for f in faces if f.get("flicker_ratio") is not None]
        out.append({"index": rec["frame"], "status": rec["status"], "identity": min(ident) if ident else None,
                    "flicker_ratio": max(flick) if flick else None})
    return out


class QAGate(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        limit = "(-1 = the measured default for the analyzer's recognizer; see README 'QA thresholds')"
        return io.Schema(
            node_id="SwaplineQAGate",
            display_name="QA Gate (Swapline)",
            category=f"{CATEGORY}/qa",
            description="Checks every swapped frame: identity similarity to the source, leakage of the target's "
                        "identity, landmark drift (expression/pose kept), temporal flicker versus the input, and "
                        "that the swapped face is still detected. Failing frames are flagged, reverted to the "
                        "original, or fail the job; no frame is ever dropped. Writes a JSON report and a plot.",
            inputs=[
                Frames.Input("frames", tooltip="The swapped frame sequence."),
                Faces.Input("faces", tooltip="The tracked target faces (Track Faces)."),
                FaceModel.Input("face_model", tooltip="The source identity the swap should show."),
                Analyzer.Input("analyzer", tooltip="Analyzer for re-detection and embeddings (same recognizer as the face model)."),
                io.Combo.Input("policy", options=list(POLICIES), default="flag only",
                               tooltip="Failing frames: only flag them, put the original frame back, or stop the job."),
                io.Float.Input("min_identity", default=AUTO, min=-1.0, max=1.0, step=0.01,
                               tooltip=f"Minimum similarity of the swapped face to the source {limit}."),
                io.Float.Input("max_leakage", default=AUTO, min=-1.0, max=1.0, step=0.01,
                               tooltip=f"Maximum similarity of the swapped face to the original target face {limit}."),
                io.Float.Input("max_landmark_drift", default=AUTO, min=-1.0, max=5.0, step=0.01,
                               tooltip=f"Maximum keypoint drift in inter-ocular distances {limit}."),
                io.Float.Input("max_flicker_ratio", default=AUTO, min=-1.0, max=50.0, step=0.1,
                               tooltip=f"Maximum face-region flicker relative to the input clip {limit}."),
                io.Boolean.Input("require_redetection", default=True, tooltip="Fail frames where the swapped face is no longer detected."),
                io.Int.Input("sample_every", default=1, min=1, max=100,
                             tooltip="Evaluate every n-th frame (1 = every frame); the others are marked 'skipped'."),
                io.String.Input("filename_prefix", default="swapline/qa", tooltip="Where the QA report JSON and plot are written in the output folder."),
            ],
            outputs=[Frames.Output(display_name="frames"), QAReport.Output(display_name="qa"),
                     io.String.Output(display_name="report")],
            # an output node, so a re-queued (cached) prompt still sends its chart and report
            is_output_node=True,
        )

    @classmethod
    def execute(cls, frames, faces, face_model, analyzer, policy, min_identity, max_leakage, max_landmark_drift,
                max_flicker_ratio, require_redetection, sample_every, filename_prefix) -> io.NodeOutput:
        th = thresholds_for(analyzer, min_identity=min_identity, max_leakage=max_leakage,
                            max_landmark_drift=max_landmark_drift, max_flicker_ratio=max_flicker_ratio,
                            require_redetection=require_redetection)
        pbar = progress(frames.count)
        hooks = pipeline.Hooks(progress=pbar.update, check_interrupt=check_interrupt)
        models = model_manifest(frames.model_files())
        report = core_qa.run_qa(frames.original(), frames, faces, face_model, analyzer, th, hooks,
                                sample_every=sample_every, models=models,
                                store_root=model_paths.swapline_cache_dir())
        report["policy"] = policy
        revert = core_qa.apply_policy(policy, report)  # raises for "fail job" when the decision is fail
        out = pipeline.revert_frames(frames, revert, model_paths.swapline_cache_dir(), hooks) if revert else frames
        report["reverted_frames"] = sorted(revert)

        out_dir, name, counter, subfolder, _ = folder_paths.get_save_image_path(
            filename_prefix, folder_paths.get_output_directory(), 1000, 420)
        stem = f"{name}_{counter:05}_qa"
        with open(os.path.join(out_dir, stem + ".json"), "w") as f:
            json.dump(report, f, indent=1)
        plot = plot_report(report)
        write_image(os.path.join(out_dir, stem + ".png"), plot)
        chart = {"decision": report["decision"], "summary": report["summary"], "thresholds": th.to_json(),
                 "frames": compact_frames(report), "report_file": os.path.join(subfolder, stem + ".json")}
        ui_data = {"images": [ui.SavedResult(stem + ".png", subfolder, io.FolderType.output)], "swapline_qa": [chart]}
        return io.NodeOutput(out, report, json.dumps(report["summary"]), ui=ui_data)
