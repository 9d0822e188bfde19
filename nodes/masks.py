"""Face Mask Options: which parts of the mask stack cut the swap (occlusion, regions, mouth)."""
from __future__ import annotations

from comfy_api.latest import io
from typing_extensions import override

from ..swapline_core.errors import SwaplineError
from ..swapline_core.masks import AREAS, DEFAULT_REGIONS, REGIONS, parse_list
from ..swapline_core.masks import MaskOptions as CoreMaskOptions
from ..swapline_core.masks import rules as occluder_rules
from . import model_paths
from .absent import ABSENT, missing
from .types import CATEGORY, MaskOptions

BUILTIN = "builtin (skin colour, no model)"
OFF = "off"
BOTH = "builtin + "


def mask_files() -> list[str]:
    return model_paths.files(model_paths.FACEMASK)


def occlusion_choices() -> list[str]:
    files = mask_files()
    return [BUILTIN, OFF] + files + [BOTH + f for f in files]


def build_options(occlusion: str, sensitivity: float, parser: str, regions: str, areas: str, mouth: str,
                  mouth_size: float, mouth_feather: float, mouth_lower_lip: float, erode: float, blur: float,
                  temporal: int, rules_off: str = "") -> CoreMaskOptions:
    mode, occluder = "off", None
    if occlusion == BUILTIN:
        mode = "builtin"
    elif occlusion.startswith(BOTH):
        mode, occluder = "builtin+model", occlusion[len(BOTH):]
    elif occlusion != OFF:
        mode, occluder = "model", occlusion
    if occluder:
        occluder = model_paths.resolve(model_paths.FACEMASK, occluder)
    parser_path = None if parser == OFF else model_paths.resolve(model_paths.FACEMASK, parser)
    return CoreMaskOptions(
        occlusion=mode, occluder_path=occluder, occlusion_sensitivity=sensitivity, region_path=parser_path,
        regions=parse_list(regions, tuple(REGIONS), "face region(s)"),
        areas=parse_list(areas, tuple(AREAS), "landmark area(s)"), mouth=mouth, mouth_size=mouth_size,
        mouth_feather=mouth_feather, mouth_lower_lip=mouth_lower_lip, erode=erode, blur=blur, temporal=temporal,
        rules_off=occluder_rules.parse_off(rules_off))


class MaskOptionsNode(io.ComfyNode):
    @classmethod
    @override
    def define_schema(cls):
        return io.Schema(
            node_id="SwaplineMaskOptions",
            display_name="Face Mask Options (Swapline)",
            category=f"{CATEGORY}/swap",
            description="The mask stack computed on the target face for every swapper: occluders (glasses, hands, "
                        "hair, microphones) and the open mouth interior keep the target's pixels. Parts combine by "
                        "minimum with the swapper's own feathered mask and are smoothed along each track. Models "
                        "(FaceFusion's xseg_*.onnx occluders, bisenet_resnet_*.onnx parsers) go in models/facemask.",
            inputs=[
                io.Combo.Input("occlusion", options=occlusion_choices(), default=BUILTIN,
                               tooltip="Occluder estimate: built-in (target's own skin colour per track; cannot see "
                                       "an occluder of the same colour as the skin), an XSeg ONNX from "
                                       "models/facemask, both (stricter of the two), or off."),
                io.Float.Input("occlusion_sensitivity", default=1.0, min=0.3, max=3.0, step=0.05,
                               tooltip="Built-in occluder: above 1 flags more colours as not-skin, below 1 fewer."),
                io.Combo.Input("parser", options=[OFF] + mask_files(), default=OFF,
                               tooltip="BiSeNet face parser ONNX (models/facemask): limits the swap to the regions below."),
                io.String.Input("regions", default=", ".join(DEFAULT_REGIONS),
                                tooltip=f"Regions the swap may replace (with a parser), comma separated: "
                                        f"{', '.join(REGIONS)}; or 'all'."),
                io.String.Input("areas", default="",
                                tooltip=f"Limit the swap to landmark areas (needs 68 landmarks), comma separated: "
                                        f"{', '.join(AREAS)}. Empty: the whole face."),
                io.Combo.Input("mouth", options=["auto", "on", "off"], default="auto",
                               tooltip="Keep the target's open mouth interior (teeth, tongue). auto: on for swappers "
                                       "that warp the source's mouth (the built-in classical one), off for neural "
                                       "swappers, which already render the target's expression."),
                io.Float.Input("mouth_size", default=0.08, min=0.0, max=0.5, step=0.01,
                               tooltip="Grow the kept mouth interior by this fraction of the mouth width."),
                io.Float.Input("mouth_feather", default=0.12, min=0.0, max=0.5, step=0.01,
                               tooltip="Soft edge around the kept mouth, fraction of the mouth width."),
                io.Float.Input("mouth_lower_lip", default=0.0, min=0.0, max=1.0, step=0.05,
                               tooltip="Also keep this much of the target's lower lip (0: none, 1: all of it)."),
                io.Float.Input("erode", default=0.0, min=0.0, max=0.2, step=0.005,
                               tooltip="Grow every occluder cut by this fraction of the face size."),
                io.Float.Input("blur", default=0.02, min=0.0, max=0.2, step=0.005,
                               tooltip="Feather of occluder cuts, fraction of the face size (outside the occluder)."),
                io.Int.Input("temporal", default=2, min=0, max=6,
                             tooltip="Median over +-N frames of each track (video), so masks do not flicker."),
                io.String.Input("rules_off", default="", optional=True,
                                tooltip="Built-in occluder rules to switch off, comma separated (empty: all on; each "
                                        "face's record in Swap Faces' report counts what each rule kept). "
                                        + occluder_rules.describe()),
            ],
            outputs=[MaskOptions.Output(display_name="mask_options")],
        )

    @classmethod
    @override
    def validate_inputs(cls, occlusion=ABSENT, parser=ABSENT, regions=ABSENT, areas=ABSENT, rules_off=None):
        gap = missing(cls, {"occlusion": occlusion, "parser": parser, "regions": regions, "areas": areas}, {
            "occlusion": f"'{BUILTIN}', '{OFF}' or an XSeg occluder file from models/facemask",
            "parser": f"'{OFF}' or a BiSeNet face parser file from models/facemask",
            "regions": f"the face regions the swap may replace, comma separated ({', '.join(REGIONS)}), or 'all'",
            "areas": f"landmark areas, comma separated ({', '.join(AREAS)}), or '' for the whole face"})
        if gap is not None:
            return gap
        # a linked input (None) is judged when the node runs, where its value exists
        files = mask_files()
        name = None if occlusion is None else occlusion.removeprefix(BOTH)
        if name not in (BUILTIN, OFF, None):
            ok = model_paths.check_choice("occlusion (occluder file)", name, files, model_paths.folders(model_paths.FACEMASK))
            if ok is not True:
                return ok
        if parser not in (OFF, None):
            ok = model_paths.check_choice("parser (face parser file)", parser, files, model_paths.folders(model_paths.FACEMASK))
            if ok is not True:
                return ok
        try:
            for text, allowed, what in ((regions, REGIONS, "face region(s)"), (areas, AREAS, "landmark area(s)")):
                if text is not None:
                    parse_list(text, tuple(allowed), what)
            occluder_rules.parse_off(rules_off)      # optional: absent or linked (None) is all on
        except SwaplineError as exc:
            return str(exc)
        return True

    @classmethod
    @override
    def execute(cls, occlusion, occlusion_sensitivity, parser, regions, areas, mouth, mouth_size, mouth_feather,
                mouth_lower_lip, erode, blur, temporal, rules_off="") -> io.NodeOutput:
        return io.NodeOutput(build_options(occlusion, occlusion_sensitivity, parser, regions, areas, mouth,
                                           mouth_size, mouth_feather, mouth_lower_lip, erode, blur, temporal,
                                           rules_off))
