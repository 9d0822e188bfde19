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
from ..swapline_core.backends.manifest import model_manifest
from ..swapline_core.errors import SwaplineError
from ..swapline_core.provenance import audit_log
from ..swapline_core.provenance import signing as signing_config
from ..swapline_core.provenance.c2pa import sign_and_verify
from ..swapline_core.provenance.hashing import sha256_file
from ..swapline_core.video.write import write_image
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
                        "images) and signs it with C2PA Content Credentials: opened target, edited with "
                        "digitalSourceType compositeWithTrainedAlgorithmicMedia, the target (parentOf) and "
                        "source face (componentOf) as ingredients, and a swapline.qa assertion. The file is "
                        "read back and verified; on any signing failure the unsigned output is kept and the "
                        "error reported. Every job is appended to swapline_audit.jsonl. Credentials come from "
                        "user/swapline/signing.json (see README), else a local development certificate.",
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
                                 tooltip="Refuse to sign with the local development certificate: a configured signing.json is required."),
            ],
            outputs=[io.String.Output(display_name="path"), io.String.Output(display_name="signing")],
            is_output_node=True,
        )

    @classmethod
    @override
    def execute(cls, filename_prefix, image_format, crf, preset, audio, attestation, require_trusted_signer,
                frames=None, images=None, target_images=None, face_model=None, qa=None) -> io.NodeOutput:
        if (frames is None) == (images is None):
            raise SwaplineError("connect exactly one of 'frames' or 'images'")
        creds = signing_config.load_signing_credentials(folder_paths.get_user_directory(),
                                                        require_trusted=require_trusted_signer)
        qa_summary = (qa or {}).get("summary", {})
        decision = (qa or {}).get("decision")
        with tempfile.TemporaryDirectory() as tmp:
            if frames is not None:
                same_job = qa is not None and qa.get("file_prefix") == filename_prefix
                outputs = [encode_sequence(frames, filename_prefix, crf, preset, audio,
                                           index=qa.get("file_index") if same_job else None)]
                target = (frames.path, os.path.basename(frames.path))
                models = model_manifest(frames.model_files())
            else:
                if target_images is None:
                    raise SwaplineError("connect 'target_images' (the original images) so the target can be "
                                        "recorded as the parent ingredient")
                outputs, target = _write_images(images, target_images, filename_prefix, image_format, tmp)
                models = (qa or {}).get("models", [])
            source = _source_ingredient(face_model, tmp)
            results = []
            for path, subfolder, file, summary in outputs:
                t = target if isinstance(target, tuple) else target[len(results)]
                # what the encode changed about size and timing, stated in the manifest too
                converted = {k: summary[k] for k in ("padded", "timing") if k in summary}
                res = sign_and_verify(path, creds=creds, target_ingredient=t, source_ingredient=source,
                                      qa_summary={"decision": decision, **qa_summary,
                                                  **({"conversions": converted} if converted else {})},
                                      models=models,
                                      attestation=attestation or None,
                                      software_agent=f"Swapline {swapline_core.__version__}")
                audit = audit_log.append_job(
                    folder_paths.get_output_directory(), job_id=_job_id(), input_sha256=res.input_sha256,
                    output_sha256=res.output_sha256, models=models,
                    settings={"crf": crf, "preset": preset, "audio": audio, "format": os.path.splitext(file)[1][1:],
                              **{k: summary[k] for k in ("padded", "timing") if k in summary}},
                    qa_decision=decision, signer_fingerprint=creds.fingerprint_sha256,
                    output=os.path.join(subfolder, file), target_sha256=sha256_file(t[0]),
                    signer_kind=res.signer_kind, signed=res.signed, signing_error=res.error)
                results.append({"file": os.path.join(subfolder, file), "subfolder": subfolder, "filename": file,
                                "signed": res.signed, "state": res.validation_state, "signer_kind": res.signer_kind,
                                "signer_fingerprint": res.signer_fingerprint, "error": res.error,
                                "output_sha256": res.output_sha256, "audit_log": os.path.basename(audit), **summary})
        status = ("failed" if not all(r["signed"] for r in results) else
                  "dev certificate" if results[0]["signer_kind"] == "development" else "trusted")
        saved = [ui.SavedResult(r["filename"], r["subfolder"], io.FolderType.output) for r in results]
        ui_data = {"images": saved, "swapline_signing": [{"status": status, "results": results}]}
        if frames is not None:
            ui_data["animated"] = (True,)
        return io.NodeOutput(outputs[0][0], json.dumps({"status": status, "results": results}), ui=ui_data)


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
