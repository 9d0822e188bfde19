"""Neural swapper families by their published signatures, and detecting a file's family.

Every fact in :data:`FAMILIES` (crop size, alignment template, normalisation, how the source is
given, output range) is taken from the families' published code: FaceFusion's face swapper
model set and pre/post-processing, and ReActor's HyperSwap/ReSwapper paths. docs/swappers.md
lists each fact with the file it was read from. Nothing here is guessed from a model's output.

Detection looks at the ONNX inputs alone: the target crop's size, and whether the source is an
embedding [N,512] or an image [N,3,s,s]. Four families share "256 px target + 512-d source"
(HyperSwap, GHOST, SimSwap 256, HiFiFace, ReSwapper 256): for those, and only those, the file
name decides, and a file whose name names none of them is refused with what to do.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...errors import BadModelError

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class FamilySpec:
    name: str                       # family id ("hyperswap")
    models: tuple[str, ...]         # published model names in this family
    size: int                       # target crop size the graph takes
    template: str                   # faces.align.NAMED_TEMPLATES key the target is aligned to
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    # "emap": ArcFace embedding through the graph's last 512x512 initializer (INSwapper);
    # "embedding": the L2-normalised ArcFace embedding as-is; "converter": the ArcFace embedding
    # through an embedding converter ONNX; "image": an aligned source face image.
    source: str
    converter: str | None = None            # converter file name (FaceFusion's crossface_*.onnx)
    normalise_converted: bool = True        # L2-normalise the converter's output
    source_template: str | None = None      # image sources: template and size of the source crop
    source_size: int = 0
    # "unit": output in [0,1]; "denorm": output in the input's normalised space (undo mean/std)
    output: str = "unit"
    commercial_note: str = ""

    @property
    def uses_embedding(self) -> bool:
        return self.source != "image"

    def describe(self) -> str:
        src = {"emap": "ArcFace 512-d through the graph's emap",
               "embedding": "ArcFace 512-d (normalised)",
               "converter": f"ArcFace 512-d through {self.converter}",
               "image": f"aligned source image [N,3,{self.source_size},{self.source_size}]"}[self.source]
        return f"{self.name}: target [N,3,{self.size},{self.size}] + source {src} ({', '.join(self.models)})"


_HALF = (0.5, 0.5, 0.5)
_ZERO, _ONE = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)

FAMILIES: dict[str, FamilySpec] = {f.name: f for f in (
    FamilySpec("inswapper", ("inswapper_128", "inswapper_128_fp16", "reswapper_128"), 128, "arcface_128",
               _ZERO, _ONE, "emap"),
    # ReSwapper 256 is an INSwapper-architecture graph trained at 256 px; ReActor loads it with
    # insightface's INSwapper class (emap, [0,1] RGB, insightface's 128-template scaled to 256).
    FamilySpec("reswapper_256", ("reswapper_256",), 256, "arcface_128", _ZERO, _ONE, "emap"),
    FamilySpec("hyperswap", ("hyperswap_1a_256", "hyperswap_1b_256", "hyperswap_1c_256"), 256, "arcface_128",
               _HALF, _HALF, "embedding", output="denorm"),
    FamilySpec("ghost", ("ghost_1_256", "ghost_2_256", "ghost_3_256"), 256, "arcface_112_v1", _HALF, _HALF,
               "converter", converter="crossface_ghost.onnx", normalise_converted=False, output="denorm"),
    FamilySpec("simswap", ("simswap_256",), 256, "arcface_112_v1", IMAGENET_MEAN, IMAGENET_STD,
               "converter", converter="crossface_simswap.onnx"),
    FamilySpec("simswap_unofficial_512", ("simswap_unofficial_512",), 512, "arcface_112_v1", _ZERO, _ONE,
               "converter", converter="crossface_simswap.onnx"),
    FamilySpec("hififace", ("hififace_unofficial_256",), 256, "mtcnn_512", _HALF, _HALF,
               "converter", converter="crossface_hififace.onnx", output="denorm"),
    FamilySpec("blendswap", ("blendswap_256",), 256, "ffhq_512", _ZERO, _ONE, "image",
               source_template="arcface_112_v2", source_size=112),
    FamilySpec("uniface", ("uniface_256",), 256, "ffhq_512", _HALF, _HALF, "image",
               source_template="ffhq_512", source_size=256, output="denorm"),
)}

# Families whose I/O shapes are identical: only the file name can tell them apart.
COLLIDING_256 = ("hyperswap", "ghost", "simswap", "hififace", "reswapper_256")
_NAME_HINTS = (("reswapper_256", "reswapper"), ("hyperswap", "hyperswap"), ("ghost", "ghost"),
               ("simswap", "simswap"), ("hififace", "hififace"))


@dataclass(frozen=True)
class Signature:
    target: str                     # input names, as the graph spells them
    source: str
    target_shape: tuple
    source_shape: tuple
    output_shape: tuple

    def text(self) -> str:
        return (f"{self.target}{list(self.target_shape)}, {self.source}{list(self.source_shape)} -> "
                f"{list(self.output_shape)}")


def known_signatures() -> str:
    return "\n".join(f"  - {f.describe()}" for f in FAMILIES.values())


def read_signature(path: str, session) -> Signature:
    ins, outs = session.get_inputs(), session.get_outputs()
    sig_text = ", ".join(f"{i.name}{i.shape}" for i in ins) + " -> " + ", ".join(f"{o.name}{o.shape}" for o in outs)
    if len(ins) != 2 or not outs:
        raise BadModelError(path, f"it is not a face swapper of a known family (got {sig_text}). "
                                  f"Known signatures:\n{known_signatures()}")
    names = [i.name for i in ins]
    # FaceFusion feeds inputs by the names 'target'/'source'; insightface by position (target
    # first). Prefer the names where the graph has them.
    if set(names) == {"target", "source"}:
        t, s = (ins[0], ins[1]) if names[0] == "target" else (ins[1], ins[0])
    else:
        t, s = ins[0], ins[1]
    return Signature(t.name, s.name, tuple(t.shape), tuple(s.shape), tuple(outs[0].shape))


def _square(shape: tuple) -> int | None:
    if len(shape) == 4 and shape[1] == 3 and isinstance(shape[2], int) and shape[2] == shape[3]:
        return int(shape[2])
    return None


def detect_family(path: str, session, family: str = "auto") -> tuple[FamilySpec, str]:
    """(spec, how it was decided) for the swapper at ``path``; BadModelError when unknown.

    ``family`` other than "auto" is the user's choice; it must still fit the signature.
    """
    sig = read_signature(path, session)
    size = _square(sig.target_shape)
    src_dim = sig.source_shape[-1] if sig.source_shape else None
    src_img = _square(sig.source_shape)
    unknown = BadModelError(path, f"its signature {sig.text()} matches no known swapper family. "
                                  f"Known signatures:\n{known_signatures()}")
    if size is None:
        raise unknown
    if family != "auto":
        spec = FAMILIES.get(family)
        if spec is None:
            raise BadModelError(path, f"unknown family '{family}'; known: {', '.join(FAMILIES)}")
        fits = (spec.size == size and ((spec.source == "image" and src_img == spec.source_size)
                                       or (spec.source != "image" and src_dim == 512)))
        if not fits:
            raise BadModelError(path, f"it was declared a {family} swapper, but its signature {sig.text()} "
                                      f"is not that family's ({spec.describe()})")
        return spec, "chosen on the loader"
    if src_img is not None:
        for spec in FAMILIES.values():
            if spec.source == "image" and spec.size == size and spec.source_size == src_img:
                return spec, "signature"
        raise unknown
    if src_dim != 512 or len(sig.source_shape) != 2:
        raise unknown
    candidates = [f for f in FAMILIES.values() if f.source != "image" and f.size == size]
    if len(candidates) == 1:
        return candidates[0], "signature"
    if not candidates:
        raise unknown
    stem = Path(path).stem.lower()
    for fam, token in _NAME_HINTS:
        if token in stem and FAMILIES[fam] in candidates:
            return FAMILIES[fam], f"file name (the signature is shared by {', '.join(c.name for c in candidates)})"
    raise BadModelError(path, f"its signature {sig.text()} is shared by the "
                              f"{', '.join(c.name for c in candidates)} families, and its name names none of "
                              "them. Keep the published file name (e.g. hyperswap_1a_256.onnx, ghost_1_256.onnx, "
                              "simswap_256.onnx, reswapper_256.onnx) or choose the family on the loader.")
