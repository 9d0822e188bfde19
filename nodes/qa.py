"""QA gate node: a thin adapter over swapline_core.qa (metrics, thresholds, decision, policies)."""
from __future__ import annotations

import json
import os

import folder_paths
from comfy_api.latest import io, ui
from typing_extensions import override

from ..swapline_core.backends.manifest import model_manifest
from ..swapline_core.faces import source_check
from ..swapline_core.qa import decide, segments
from ..swapline_core.qa import gate as core_qa
from ..swapline_core.qa.decide import compact_frames
from ..swapline_core.qa.plot import plot_report
from ..swapline_core.video import stages as pipeline
from ..swapline_core.video.write import write_image
from . import model_paths, qa_limits
from .absent import ABSENT, sentence
from .convert import check_interrupt, progress
from .types import CATEGORY, Analyzer, FaceModel, Faces, Frames, QALimits, QAReport, SafetyClassifier

POLICIES = core_qa.POLICIES
GATE_TITLE = "QA Gate"

LIMIT_SET_TIP = ("Which limits the gate applies. viewer-labelled (strict) / (mesh swap): chosen by a rule on "
                 "faces of the built-in classical / mesh swap labelled by eye over many clips "
                 "(docs/measurements/qa_agreement.md); they fail far more faces a viewer rejects, and some a viewer "
                 "accepts; a metric their rule did not choose is reported but fails no face. calibrated (sample "
                 "clip): chosen on the sample clip alone. auto (default): the labelled set of the built-in swap "
                 "that made the frames; calibrated for trained swappers (not yet measured against labels: the "
                 "report says so). Single limits: a QA Limit Overrides node on the "
                 "'limits' input.")


def thresholds_for(analyzer, limit_set: str = decide.DEFAULT_LIMIT_SET, **given) -> core_qa.QAThresholds:
    """The named limit set for the analyzer's recognizer, with ``given`` (limits and flags) on top."""
    return core_qa.thresholds_for(analyzer.recognizer_name, limit_set, **given)


class QAGate(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineQAGate",
            display_name=f"{GATE_TITLE} (Swapline)",
            category=f"{CATEGORY}/qa",
            description="Checks every swapped frame: identity similarity to the source, leakage of the target's "
                        "identity, landmark drift, flicker, expression (mouth follows the target), occluders "
                        "painted over, colour cast, paste seams and foreign colour, off-face pastes, and "
                        "coverage (was every tracked face swapped). A clip where nothing was swapped fails. "
                        "Failing frames get the original frame back (default), are only flagged, or fail the "
                        "job; no frame is ever dropped. The limits are a named set (limit_set); single limits "
                        "are overridden by a QA Limit Overrides node on 'limits'. Writes a JSON report and a plot.",
            inputs=[
                Frames.Input("frames", tooltip="The swapped frame sequence."),
                Faces.Input("faces", tooltip="The tracked target faces (Track Faces)."),
                FaceModel.Input("face_model", tooltip="The source identity the swap should show."),
                Analyzer.Input("analyzer", tooltip="Analyzer for re-detection and embeddings (same recognizer as the face model)."),
                io.Combo.Input("policy", options=list(POLICIES), default=core_qa.DEFAULT_POLICY,
                               tooltip="Failing frames. keep original: decided per shot, for each face "
                                       "between two cuts: a shot whose swap fails is given back its original frames "
                                       "as a whole, a failure just past a limit (in the metric's own units; or a lone frame's landmark or "
                                       "embedding reading) inside a good shot is bridged, so a face never flips "
                                       "identity inside a shot; the report lists the segments and every failing "
                                       "frame that shipped. "
                                       f"{decide.FEW_FAILING_POLICY} (default): per shot, as keep original, but a "
                                       "shot whose frames failing outright are at most "
                                       f"{segments.FEW_FAILING_SHARE:.0%} of its evaluated frames is delivered "
                                       "swapped with those frames listed in the report (shipped_failing, why "
                                       f"'{decide.SHARE_WHY}'), otherwise kept original as a whole; a face lost, "
                                       "not swapped, or (where the limit set has those limits) an occluder "
                                       "painted over or a paste off the face on any frame keeps the shot "
                                       "original. "
                                       "keep original per frame: put the original back on every failing frame. "
                                       "flag only: ship the swap and list the failures. fail job: stop the job."),
                # Optional: limit_set so API prompts written before it still run with its default; the
                # inputs after it too, because the editor lists required widgets first and the limit set
                # belongs beside the policy. Optional widgets show in the editor like any other.
                io.Combo.Input("limit_set", options=[decide.AUTO_LIMIT_SET, *decide.LIMIT_SETS],
                               default=decide.DEFAULT_LIMIT_SET, optional=True, tooltip=LIMIT_SET_TIP),
                QALimits.Input("limits", optional=True,
                               tooltip="Optional single limits that override the limit set (QA Limit Overrides); "
                                       "a limit it leaves at -1 keeps the set's value."),
                io.Int.Input("sample_every", default=1, min=1, max=100, optional=True,
                             tooltip="Evaluate every n-th frame (1 = every frame); the others are marked 'skipped'."),
                io.Boolean.Input("require_redetection", default=True, optional=True,
                                 tooltip="Fail frames where the swapped face is no longer detected."),
                io.Boolean.Input("allow_no_face", default=False, optional=True,
                                 tooltip="Off: a clip where no face was swapped fails ('no face swapped'). On: clips "
                                         "without faces are acceptable and pass."),
                io.String.Input("filename_prefix", default="swapline/qa", optional=True,
                                tooltip="Where the QA report JSON and plot are written in the output folder."),
                SafetyClassifier.Input("safety_classifier", optional=True,
                                       tooltip="Optional content-safety recheck (Load Safety Classifier): scores every "
                                               "evaluated output frame; frames above max_safety_score fail the job's "
                                               "decision. Frames are never dropped or changed for it."),
                io.Float.Input("max_safety_score", default=0.5, min=0.0, max=1.0, step=0.01, optional=True,
                               tooltip="The unsafe-class score (0..1) above which a frame is flagged (only with a "
                                       "safety classifier)."),
                # last, so the widget values of workflows saved before it keep their places
                io.Boolean.Input("fail_on_source_warning", default=True, optional=True,
                                 tooltip="On: with a viewer-labelled limit set (the built-in swaps, which paste the "
                                         "source photo's own pixels), every swapped face fails when Build Face Model "
                                         "warned that the source photo is small or soft; viewers accepted 14 % of "
                                         "such faces (docs/qa.md). Off: the warning is only noted in the report. "
                                         "The calibrated set only notes it."),
            ],
            outputs=[Frames.Output(display_name="frames"), QAReport.Output(display_name="qa"),
                     io.String.Output(display_name="report")],
            # the prompt: limits an API prompt written before QA Limit Overrides passes to the gate itself
            hidden=[io.Hidden.prompt, io.Hidden.unique_id],
            # an output node, so a re-queued (cached) prompt still sends its chart and report
            is_output_node=True,
        )

    @classmethod
    @override
    def execute(cls, frames, faces, face_model, analyzer, policy, limit_set=decide.DEFAULT_LIMIT_SET, limits=None,
                sample_every=1, require_redetection=True, allow_no_face=False, filename_prefix="swapline/qa",
                safety_classifier=None, max_safety_score=0.5, fail_on_source_warning=True) -> io.NodeOutput:
        hidden = cls.hidden
        old = qa_limits.legacy_limits(hidden.prompt if hidden else None, hidden.unique_id if hidden else None,
                                      GATE_TITLE)
        overrides = qa_limits.merge(limits, old, GATE_TITLE)
        chosen = decide.resolve_limit_set(limit_set, [r.method for r in frames.stage_records() if r.stage == "swap"])
        # off turns the rule off; on keeps the limit set's own choice (on only for the labelled sets)
        th = thresholds_for(analyzer, chosen, require_redetection=require_redetection, allow_no_face=allow_no_face,
                            max_safety_score=max_safety_score,
                            fail_on_source_warning=None if fail_on_source_warning else False, **overrides)
        pbar = progress(frames.count)
        hooks = pipeline.Hooks(progress=pbar.update, check_interrupt=check_interrupt)
        models = model_manifest(frames.model_files())
        # the swap stage's refusals (guards, the swapper's competence): counted with their reason,
        # not judged as failed swaps
        report = core_qa.run_qa(frames.original(), frames, faces, face_model, analyzer, th, hooks,
                                sample_every=sample_every, models=models,
                                store_root=model_paths.swapline_cache_dir(),
                                skipped=pipeline.swap_refusals(frames), safety=safety_classifier)
        report["policy"] = policy
        report["limit_set"] = chosen
        if overrides:
            report["limit_overrides"] = dict(sorted(overrides.items()))
        report["limits_note"] = decide.limits_note(chosen, source_check.warnings_of(face_model),
                                                   th.fail_on_source_warning)
        try:
            revert = core_qa.apply_policy(policy, report)  # raises for "fail job" when the decision is fail
        except core_qa.QAFailedError as e:
            # the report is written before the job stops: it says which frames failed and why
            report["reverted_frames"] = []
            path = cls._write(report, th, filename_prefix)[0]
            raise core_qa.QAFailedError(e.failing, {**report["summary"], "report": path}) from None
        out = pipeline.revert_frames(frames, revert, model_paths.swapline_cache_dir(), hooks) if revert else frames
        report["reverted_frames"] = sorted(revert)
        _, ui_data = cls._write(report, th, filename_prefix)
        return io.NodeOutput(out, report, json.dumps(report["summary"]), ui=ui_data)

    @classmethod
    def _write(cls, report: dict, th, filename_prefix: str) -> tuple[str, dict]:
        out_dir, name, counter, subfolder, _ = folder_paths.get_save_image_path(
            filename_prefix, folder_paths.get_output_directory(), 1000, 420)
        stem = f"{name}_{counter:05}_qa"
        # a sink with the same prefix reuses this number: report and video of one job pair up
        report["file_index"], report["file_prefix"] = counter, filename_prefix
        path = os.path.join(out_dir, stem + ".json")
        with open(path, "w") as f:
            json.dump(report, f, indent=1)
        write_image(os.path.join(out_dir, stem + ".png"), plot_report(report))
        chart = {"decision": report["decision"], "summary": report["summary"], "thresholds": th.shown(),
                 "limit_set": report.get("limit_set"),
                 "segments": report.get("segments", [])[:200],
                 "shipped_failing": report.get("shipped_failing", [])[:200],
                 "frames": compact_frames(report), "report_file": os.path.join(subfolder, stem + ".json")}
        return path, {"images": [ui.SavedResult(stem + ".png", subfolder, io.FolderType.output)], "swapline_qa": [chart]}


def safety_files() -> list[str]:
    return model_paths.files(model_paths.SAFETY)


class SafetyClassifierLoader(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineSafetyClassifierLoader",
            display_name="Load Safety Classifier (Swapline)",
            category=f"{CATEGORY}/loaders",
            description="Loads a user-supplied content-safety image classifier (ONNX) from models/swapline_safety "
                        "for the QA gate's recheck; none is bundled. Expected: one float input [N, 3, H, W] (RGB "
                        "0..1, the whole frame resized to H x W) and one output [N, classes] of per-class scores "
                        "(docs/qa.md#content-safety-recheck).",
            inputs=[
                io.Combo.Input("classifier", options=safety_files(),
                               tooltip="ONNX image classifier in models/swapline_safety."),
                io.Int.Input("unsafe_class", default=-1, min=-1, max=9999,
                             tooltip="Index of the 'unsafe' class in the model's output (-1 = from the model's "
                                     "metadata swapline.unsafe_class)."),
                io.Combo.Input("provider", options=["auto", "CPU", "CUDA"], default="auto",
                               tooltip="ONNX Runtime execution provider."),
            ],
            outputs=[SafetyClassifier.Output(display_name="safety_classifier")],
        )

    @classmethod
    @override
    def validate_inputs(cls, classifier=ABSENT):
        if classifier is ABSENT:
            return sentence(cls, "classifier", "an ONNX image classifier from models/swapline_safety "
                                               "(docs/qa.md#content-safety-recheck)")
        return classifier is None or model_paths.check_choice("safety classifier", classifier, safety_files(),
                                        model_paths.folders(model_paths.SAFETY), "docs/qa.md#content-safety-recheck")

    @classmethod
    @override
    def fingerprint_inputs(cls, classifier, **_):
        return model_paths.file_fingerprint(model_paths.SAFETY, classifier)

    @classmethod
    @override
    def execute(cls, classifier, unsafe_class, provider) -> io.NodeOutput:
        from ..swapline_core.qa.safety import SafetyClassifier as Core

        return io.NodeOutput(Core(model_paths.resolve(model_paths.SAFETY, classifier),
                                  None if unsafe_class < 0 else unsafe_class, provider))
