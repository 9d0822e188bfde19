"""Swapline's custom ComfyUI socket types (all prefixed SWAPLINE_)."""
from comfy_api.latest import io

Analyzer = io.Custom("SWAPLINE_ANALYZER")
Swapper = io.Custom("SWAPLINE_SWAPPER")
Restorer = io.Custom("SWAPLINE_RESTORER")
Faces = io.Custom("SWAPLINE_FACES")
FaceModel = io.Custom("SWAPLINE_FACE_MODEL")
Transforms = io.Custom("SWAPLINE_FACE_TRANSFORMS")
Frames = io.Custom("SWAPLINE_FRAMES")
QAReport = io.Custom("SWAPLINE_QA")
QALimits = io.Custom("SWAPLINE_QA_LIMITS")  # QA Limit Overrides -> QA Gate: {limit name: value}
SafetyClassifier = io.Custom("SWAPLINE_SAFETY_CLASSIFIER")
MaskOptions = io.Custom("SWAPLINE_MASK_OPTIONS")

CATEGORY = "Swapline"
