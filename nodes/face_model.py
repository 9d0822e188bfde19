"""Face model nodes: build a source identity from images, save it, load it."""
from __future__ import annotations

import json
import os
import re

import folder_paths
from comfy_api.latest import io, ui
from typing_extensions import override

from ..swapline_core.faces import identity as core_fm
from . import model_paths
from .convert import to_arrays
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
                        "face of each image is embedded and the normalised embeddings are averaged.",
            inputs=[
                io.Image.Input("images", tooltip="One or more photos of the source person."),
                Analyzer.Input("analyzer", tooltip="The analyzer whose recognizer defines the identity space."),
                io.Combo.Input("reduce", options=["mean", "median"], default="mean",
                               tooltip="How per-image embeddings are combined (median resists an odd photo out)."),
            ],
            outputs=[FaceModel.Output(display_name="face_model")],
        )

    @classmethod
    @override
    def execute(cls, images, analyzer, reduce) -> io.NodeOutput:
        fm = core_fm.build_from_images(analyzer, to_arrays(images), reduce)
        return io.NodeOutput(fm, ui=ui.PreviewText(json.dumps({"recognizer": fm.recognizer, **fm.metadata})))


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
                        "name) under models/swapline/faces.",
            inputs=[FaceModel.Input("face_model", tooltip="The face model to save."),
                    io.String.Input("name", default="my_face", tooltip="File name without extension (letters, digits, "
                                                                       "- _ . and spaces).")],
            outputs=[],
            is_output_node=True,
        )

    @classmethod
    @override
    def execute(cls, face_model, name) -> io.NodeOutput:
        if not _SAFE.match(name) or name.startswith("."):
            raise ValueError(f"face model name '{name}' may use letters, digits, '-', '_', '.' and spaces only")
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
    def validate_inputs(cls, face_model):
        return model_paths.check_choice("face model", face_model, model_paths.files(model_paths.FACE_MODELS),
                                        model_paths.folders(model_paths.FACE_MODELS), "save one with Save Face Model")

    @classmethod
    @override
    def execute(cls, face_model) -> io.NodeOutput:
        return io.NodeOutput(core_fm.load(model_paths.resolve(model_paths.FACE_MODELS, face_model)))
