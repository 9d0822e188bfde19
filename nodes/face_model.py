"""Face model nodes: build a source identity from images, save it, load it."""
from __future__ import annotations

import json
import os
import re

import folder_paths
from comfy_api.latest import io, ui
from typing_extensions import override

from ..swapline_core.faces import identity as core_fm
from ..swapline_core.faces import source_check
from . import model_paths
from .absent import ABSENT, sentence
from .convert import preview_ui, to_arrays
from .types import CATEGORY, Analyzer, FaceModel


class BuildFaceModel(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineBuildFaceModel",
            display_name="Build Face Model (Swapline)",
            category=f"{CATEGORY}/face model",
            description="Builds the source identity from one or many photos of the same person: the largest "
                        "face of each image is embedded and the normalised embeddings are averaged. Each face "
                        "is checked for size and sharpness: a face too small to swap from (eyes under 12 px "
                        "apart) is refused, a small (under 32 px) or enlarged/soft one gets a warning here "
                        "and in the swap's report.",
            inputs=[
                io.Image.Input("images", tooltip="One or more photos of the source person."),
                Analyzer.Input("analyzer", tooltip="The analyzer whose recognizer defines the identity space."),
                io.Combo.Input("reduce", options=["mean", "median"], default="mean",
                               tooltip="How per-image embeddings are combined (median resists an odd photo out)."),
                *consent_inputs(),
            ],
            outputs=[FaceModel.Output(display_name="face_model")],
        )

    @classmethod
    @override
    def execute(cls, images, analyzer, reduce, consent_given_by="", consent_date="", consent_scope="",
                consent_document_sha256="") -> io.NodeOutput:
        fm = core_fm.build_from_images(analyzer, to_arrays(images), reduce)
        if consent_given_by.strip() or consent_scope.strip() or consent_document_sha256.strip():
            fm = core_fm.with_consent(fm, core_fm.make_consent(fm, consent_given_by, consent_date, consent_scope,
                                                               consent_document_sha256))
        # The source check's warnings lead the node's text: a soft source makes a soft swap, and the
        # user should read why here rather than guess it from the result.
        text = json.dumps({"recognizer": fm.recognizer, **fm.metadata})
        warnings = source_check.warnings_of(fm)
        if warnings:
            text = ("\n".join(f"WARNING: {w}" for w in warnings) + "\n" + GATE_CONSEQUENCE + "\n\n" + text)
        return io.NodeOutput(fm, ui={**ui.PreviewText(text).as_dict(),
                                     **preview_ui(cls, source_check=fm.metadata.get("source_check"))})


# What the warning then does downstream, said where the user can still change the photo.
GATE_CONSEQUENCE = ("With a built-in swap and the QA Gate's default limits, every face swapped from this "
                    "photo fails QA (the gate's fail_on_source_warning, on by default) and its shot is "
                    "delivered unswapped.")


def consent_inputs() -> list:
    """Optional consent attestation widgets; leaving 'consent_given_by' empty records none."""
    return [
        io.String.Input("consent_given_by", default="", optional=True,
                        tooltip="Consent: who consented to this face being used (the source person or their "
                                "representative). Empty: no consent is recorded."),
        io.String.Input("consent_date", default="", optional=True,
                        tooltip="Consent: when it was given (YYYY-MM-DD)."),
        io.String.Input("consent_scope", default="", optional=True,
                        tooltip="Consent: what it covers (project, media, territory, end date)."),
        io.String.Input("consent_document_sha256", default="", optional=True,
                        tooltip="Consent: optional SHA-256 (64 hex digits) of the signed consent document, "
                                "so the manifest points at exactly that document."),
    ]


_SAFE = re.compile(r"^[A-Za-z0-9_\-. ]+$")


class SaveFaceModel(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineSaveFaceModel",
            display_name="Save Face Model (Swapline)",
            category=f"{CATEGORY}/face model",
            description="Saves a face model as .safetensors (embedding, source image and hashes, recognizer "
                        "name, and any consent attestation) under models/swapline/faces.",
            inputs=[FaceModel.Input("face_model", tooltip="The face model to save."),
                    io.String.Input("name", default="my_face", tooltip="File name without extension (letters, digits, "
                                                                       "- _ . and spaces)."),
                    *consent_inputs()],
            outputs=[],
            is_output_node=True,
        )

    @classmethod
    @override
    def execute(cls, face_model, name, consent_given_by="", consent_date="", consent_scope="",
                consent_document_sha256="") -> io.NodeOutput:
        if not _SAFE.match(name) or name.startswith("."):
            raise ValueError(f"face model name '{name}' may use letters, digits, '-', '_', '.' and spaces only")
        if consent_given_by.strip() or consent_scope.strip() or consent_document_sha256.strip():
            face_model = core_fm.with_consent(face_model, core_fm.make_consent(
                face_model, consent_given_by, consent_date, consent_scope, consent_document_sha256))
        folder = model_paths.folders(model_paths.FACE_MODELS)[0]
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"{name}.safetensors")
        core_fm.save(face_model, path)
        return io.NodeOutput(ui=ui.PreviewText(f"saved {path}"))


class LoadFaceModel(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineLoadFaceModel",
            display_name="Load Face Model (Swapline)",
            category=f"{CATEGORY}/face model",
            description="Loads a saved face model from models/swapline/faces.",
            inputs=[io.Combo.Input("face_model", options=model_paths.files(model_paths.FACE_MODELS),
                                   tooltip="A .safetensors face model saved by Save Face Model.")],
            outputs=[FaceModel.Output(display_name="face_model")],
        )

    @classmethod
    @override
    def fingerprint_inputs(cls, face_model):
        path = folder_paths.get_full_path(model_paths.FACE_MODELS, face_model)
        return os.path.getmtime(path) if path else face_model

    @classmethod
    @override
    def validate_inputs(cls, face_model=ABSENT):
        if face_model is ABSENT:
            return sentence(cls, "face_model", "a .safetensors face model from models/swapline/faces "
                                               "(save one with Save Face Model)")
        return face_model is None or model_paths.check_choice("face model", face_model, model_paths.files(model_paths.FACE_MODELS),
                                        model_paths.folders(model_paths.FACE_MODELS), "save one with Save Face Model")

    @classmethod
    @override
    def execute(cls, face_model) -> io.NodeOutput:
        return io.NodeOutput(core_fm.load(model_paths.resolve(model_paths.FACE_MODELS, face_model)))
