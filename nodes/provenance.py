"""C2PA sink: write the result, sign it with Content Credentials, verify it, log the job."""
from __future__ import annotations

import json
import os
import tempfile
import uuid

import folder_paths
from comfy_api.latest import io, ui
from typing_extensions import override

from .. import swapline_core
from ..swapline_core.backends.manifest import stage_manifest
from ..swapline_core.errors import SwaplineError
from ..swapline_core.faces.identity import consent_of
from ..swapline_core.provenance import audit_log, method, sign_policy
from ..swapline_core.provenance import signing as signing_config
from ..swapline_core.provenance.hashing import sha256_media
from ..swapline_core.provenance.method import StageRecord
from ..swapline_core.video.write import write_image
from . import image_provenance
from .convert import to_arrays
from .types import CATEGORY, FaceModel, Frames, QAReport
from .video import encode_sequence


def _job_id() -> str:
    from comfy_execution.utils import get_executing_context

    ctx = get_executing_context()
    return ctx.prompt_id if ctx is not None and ctx.prompt_id else uuid.uuid4().hex


def _source_ingredient(face_model, tmpdir: str):
    if face_model is None or face_model.image is None:
        return None
    path = os.path.join(tmpdir, "source_face.png")
    write_image(path, face_model.image)
    return path, "source face"


class C2PASink(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineC2PASink",
            display_name="Save Signed (C2PA) (Swapline)",
            category=f"{CATEGORY}/output",
            description="Writes the result to ComfyUI's output folder (MP4 for frame sequences, PNG/JPEG for "
                        "images) and signs it with C2PA Content Credentials: opened target, one edit action per "
                        "stage that ran (classical warp or which trained swapper family, restorer, diffusion "
                        "refine) with its digitalSourceType, every model with sha256 and licence, the target "
                        "(parentOf) and source face (componentOf) as ingredients, the face model's consent "
                        "attestation, and a swapline.qa assertion. The file is read back and verified; if "
                        "signing fails the output is kept as *_UNSIGNED and the job fails (on_signing_failure "
                        "'fail') or reports it. Every job is appended to swapline_audit.jsonl. Credentials come "
                        "from user/swapline/signing.json (see docs/provenance.md), else a local development certificate.",
            inputs=[
                Frames.Input("frames", optional=True, tooltip="A swapped frame sequence (written as H.264 MP4)."),
                io.Image.Input("images", optional=True, tooltip="Or swapped images (written as PNG/JPEG)."),
                io.Image.Input("target_images", optional=True,
                               tooltip="The original target images (the parent ingredient) when signing images."),
                FaceModel.Input("face_model", optional=True, tooltip="The source identity (its image becomes the componentOf ingredient)."),
                QAReport.Input("qa", optional=True, tooltip="QA gate report: its summary goes into the swapline.qa assertion."),
                io.String.Input("filename_prefix", default="swapline/signed", tooltip="Output name prefix (may contain a subfolder)."),
                io.Combo.Input("image_format", options=["png", "jpeg"], default="png", tooltip="Format for images."),
                io.Int.Input("crf", default=18, min=0, max=51, tooltip="x264 quality for videos (lower = better)."),
                io.Combo.Input("preset", options=["ultrafast", "veryfast", "fast", "medium", "slow"], default="medium",
                               tooltip="x264 speed/size trade-off."),
                io.Boolean.Input("audio", default=True, tooltip="Keep the source audio in videos."),
                io.String.Input("attestation", default="", multiline=True,
                                tooltip="Optional consent/attestation text recorded in the manifest (e.g. 'subject consented on 2026-11-01')."),
                io.Boolean.Input("require_trusted_signer", default=False,
                                 tooltip="Refuse to sign with the local development certificate: a configured signing.json "
                                         "with trust anchors is required, and a signature that does not verify as "
                                         "Trusted fails the job."),
                io.Combo.Input("on_signing_failure", options=list(sign_policy.ON_FAILURE), default="fail", optional=True,
                               tooltip="fail: a job whose output cannot be signed fails with the reason. keep unsigned: "
                                       "the job succeeds. Either way the unsigned file is kept as *_UNSIGNED.<ext>."),
                io.Boolean.Input("require_consent", default=False, optional=True,
                                 tooltip="Refuse to sign unless the face model carries a consent attestation for its "
                                         "source images (recorded by Build/Save Face Model)."),
            ],
            outputs=[io.String.Output(display_name="path"), io.String.Output(display_name="signing")],
            is_output_node=True,
        )

    @classmethod
    @override
    def execute(cls, filename_prefix, image_format, crf, preset, audio, attestation, require_trusted_signer,
                frames=None, images=None, target_images=None, face_model=None, qa=None,
                on_signing_failure="fail", require_consent=False) -> io.NodeOutput:
        if (frames is None) == (images is None):
            raise SwaplineError("connect exactly one of 'frames' or 'images'")
        sign_policy.fails_closed(on_signing_failure, require_trusted_signer)   # a bad value fails first
        consent = consent_of(face_model)
        if require_consent and consent is None:
            raise SwaplineError(
                "require_consent is on, but " + ("no face model is connected" if face_model is None else
                                                 "the face model records no consent attestation for its source "
                                                 "images") + ": record consent in Build Face Model or Save Face "
                "Model (consent_given_by, consent_date, consent_scope), or switch require_consent off")
        qa_summary = (qa or {}).get("summary", {})
        decision = (qa or {}).get("decision")
        with tempfile.TemporaryDirectory() as tmp:
            if frames is not None:
                same_job = qa is not None and qa.get("file_prefix") == filename_prefix
                outputs = [encode_sequence(frames, filename_prefix, crf, preset, audio,
                                           index=qa.get("file_index") if same_job else None)]
                target = (frames.path, os.path.basename(frames.path))
                records = frames.stage_records()
            else:
                if target_images is None:
                    raise SwaplineError("connect 'target_images' (the original images) so the target can be "
                                        "recorded as the parent ingredient")
                outputs, target = _write_images(images, target_images, filename_prefix, image_format, tmp)
                records = image_provenance.lookup(images) or _unknown_images()
            stages = stage_manifest(records)
            models = _flat_models(stages)
            source = _source_ingredient(face_model, tmp)
            results, signed = [], []
            for path, subfolder, file, summary in outputs:
                t = target if isinstance(target, tuple) else target[len(results)]
                # what the encode changed about size and timing, stated in the manifest too
                converted = {k: summary[k] for k in ("padded", "timing") if k in summary}
                res = sign_policy.sign_output(
                    path, load_credentials=lambda: signing_config.load_signing_credentials(
                        folder_paths.get_user_directory(), require_trusted=require_trusted_signer),
                    require_trusted=require_trusted_signer, target_ingredient=t, source_ingredient=source,
                    qa_summary={"decision": decision, **qa_summary, **({"conversions": converted} if converted else {})},
                    models=models, stages=stages, consent=consent, attestation=attestation or None,
                    software_agent=f"Swapline {swapline_core.__version__}")
                file = os.path.basename(res.output_path)
                audit = audit_log.append_job(
                    folder_paths.get_output_directory(), job_id=_job_id(), input_sha256=res.input_sha256,
                    output_sha256=res.output_sha256, models=models,
                    settings={"crf": crf, "preset": preset, "audio": audio, "format": os.path.splitext(file)[1][1:],
                              "on_signing_failure": on_signing_failure,
                              **{k: summary[k] for k in ("padded", "timing") if k in summary}},
                    qa_decision=decision, signer_fingerprint=res.signer_fingerprint,
                    output=os.path.join(subfolder, file), target_sha256=sha256_media(t[0]),
                    signer_kind=res.signer_kind, signed=res.signed, signing_error=res.error,
                    method={"digital_source_type": method.source_type(stages), "summary": method.summary(stages)},
                    consent=consent)
                signed.append(res)
                results.append({"file": os.path.join(subfolder, file), "subfolder": subfolder, "filename": file,
                                "signed": res.signed, "state": res.validation_state, "signer_kind": res.signer_kind,
                                "signer_fingerprint": res.signer_fingerprint, "error": res.error,
                                "output_sha256": res.output_sha256, "audit_log": os.path.basename(audit),
                                "method": method.summary(stages), **summary})
        # after every output is written and logged: the reason reaches the user as the job's error
        sign_policy.raise_if_failed(signed, on_signing_failure, require_trusted_signer)
        status = ("failed" if not all(r["signed"] for r in results) else
                  "dev certificate" if results[0]["signer_kind"] == "development" else "trusted")
        saved = [ui.SavedResult(r["filename"], r["subfolder"], io.FolderType.output) for r in results]
        ui_data = {"images": saved, "swapline_signing": [{"status": status, "results": results}]}
        if frames is not None:
            ui_data["animated"] = (True,)
        return io.NodeOutput(signed[0].output_path, json.dumps({"status": status, "results": results}), ui=ui_data)


def _unknown_images() -> tuple:
    # IMAGE tensors from nodes that recorded nothing (core nodes, other packs): say so
    return (StageRecord("images", "images made by nodes that recorded no method (not a Swapline swap/restore "
                                  "node, or edited after it)", "unknown"),)


def _flat_models(stages: list[dict]) -> list[dict]:
    """Every model of every stage, once (the audit log's and the assertion's flat list)."""
    out, seen = [], set()
    for st in stages:
        for m in st["models"]:
            key = (m.get("name"), m.get("sha256"))
            if key not in seen:
                seen.add(key)
                out.append(m)
    return out


def _write_images(images, target_images, prefix: str, fmt: str, tmp: str):
    outs, targets = [], []
    arrays, originals = to_arrays(images), to_arrays(target_images)
    if len(originals) not in (1, len(arrays)):
        raise SwaplineError(f"{len(arrays)} images but {len(originals)} target images: give one or one per image")
    out_dir, name, counter, subfolder, _ = folder_paths.get_save_image_path(
        prefix, folder_paths.get_output_directory(), arrays[0].shape[1], arrays[0].shape[0])
    ext = "png" if fmt == "png" else "jpg"
    for i, a in enumerate(arrays):
        file = f"{name}_{counter + i:05}_.{ext}"
        path = os.path.join(out_dir, file)
        write_image(path, a)
        outs.append((path, subfolder, file, {"frames": 1}))
        tpath = os.path.join(tmp, f"target_{i}.png")
        write_image(tpath, originals[min(i, len(originals) - 1)])
        targets.append((tpath, f"target image {i}"))
    return outs, targets
