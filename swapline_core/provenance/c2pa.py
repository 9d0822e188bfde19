"""Content Credentials (C2PA) for Swapline outputs: sign, read back, and sign-then-verify safely.

A face swap is declared the way C2PA describes one: the target media is the ``parentOf``
ingredient opened by ``c2pa.opened``; then one ``c2pa.edited`` per stage that made pixels, each
with the digitalSourceType its method calls for (provenance.method: the classical warp is
``compositeSynthetic``, trained models ``compositeWithTrainedAlgorithmicMedia``); the swap's
action names the source face (a ``componentOf`` ingredient). Swapline's own ``swapline.qa``
assertion records the QA summary, every stage with its models (file, sha256, licence), the
user's attestation, the face model's consent record and whether the signer is a development one.

c2pa-python 0.38 API used here (found by reading the installed package): ``C2paSignerInfo(alg,
chain_pem, key_pem, ta_url)`` -> ``Signer.from_info``; ``Builder(definition, context=Context)``,
``add_ingredient(json, mime, stream)``, ``sign(signer, mime, src, dst)``; ``Reader(path,
context=Context.from_dict({"trust": {"user_anchors": pem}}))`` and ``reader.json()``.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import SwaplineError
from . import method
from .hashing import sha256_file, sha256_media
from .signing import SigningCredentials

MIME_BY_SUFFIX = {".mp4": "video/mp4", ".png": "image/png", ".jpg": "image/jpeg",
                  ".jpeg": "image/jpeg"}
# The type of a trained-model swap; each stage's own type is chosen in provenance.method.
FACE_SWAP_SOURCE_TYPE = method.TRAINED_COMPOSITE
QA_LABEL = "swapline.qa"
# Where each ingredient's file hash lives: custom keys in the ingredient's assertion metadata
# survive c2pa's round trip, and readers that do not know them simply ignore them.
INGREDIENT_SHA256_KEY = "swapline.sha256"
_TARGET_ID, _SOURCE_ID = "swapline-target", "swapline-source"
# Failure codes that only say "no trust anchor vouches for this signer": the signature and
# hashes are still intact, which c2pa reports as the state "Valid".
TRUST_ONLY_CODES = frozenset({"signingCredential.untrusted"})


class ProvenanceError(SwaplineError):
    pass


@dataclass
class VerifyResult:
    path: str
    state: str                              # Trusted | Valid | Invalid | NoManifest
    failure_codes: list[str] = field(default_factory=list)
    ingredient_failure_codes: list[str] = field(default_factory=list)
    anchors_given: bool = False
    ingredients: list[dict] = field(default_factory=list)
    qa: dict | None = None
    actions: list[dict] = field(default_factory=list)
    signature: dict = field(default_factory=dict)
    claim_generator: list[dict] = field(default_factory=list)
    error: str | None = None

    @property
    def intact(self) -> bool:
        """Signature and hashes check out, whether or not the signer is trusted."""
        return self.state in ("Trusted", "Valid")


@dataclass
class SignResult:
    ok: bool
    output_path: str
    signed: bool                            # does output_path now carry our manifest
    signer_kind: str
    signer_fingerprint: str
    validation_state: str | None = None
    failure_codes: list[str] = field(default_factory=list)
    error: str | None = None
    input_sha256: str | None = None
    output_sha256: str | None = None
    manifest_size: int = 0
    timings: dict = field(default_factory=dict)
    verify: VerifyResult | None = field(default=None, repr=False)
    manifest_bytes: bytes = field(default=b"", repr=False)


def model_entry(m: dict) -> dict:
    """role, name + sha256, and the licence and commercial-use flag where the catalog knows them."""
    out = {"name": str(m.get("name")), "sha256": m.get("sha256")}
    if m.get("role"):
        out = {"role": str(m["role"]), **out}
    out.update({k: m[k] for k in ("licence", "commercial") if m.get(k) is not None})
    return out


def mime_for(path: str | os.PathLike) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in MIME_BY_SUFFIX:
        raise ProvenanceError(f"cannot sign '{path}': Content Credentials are written for "
                              f"{', '.join(sorted(MIME_BY_SUFFIX))} files only")
    return MIME_BY_SUFFIX[suffix]


def sign_media(input_path, output_path, *, creds: SigningCredentials,
               target_ingredient: tuple[str, str],
               source_ingredient: tuple[str, str] | None,
               qa_summary: dict, models: list[dict], attestation: str | None,
               software_agent: str | None = None, dev_signer: bool | None = None,
               thumbnails: bool = False, stages: list[dict] | None = None,
               consent: dict | None = None) -> SignResult:
    """Write ``output_path``: ``input_path`` with an embedded, signed manifest.

    ``stages`` (backends.manifest.stage_manifest) say what ran, by which method and models; the
    actions and digitalSourceType follow from them. Without them the method is declared as not
    recorded (and, conservatively, trained). ``consent`` is the face model's structured consent
    attestation (faces.identity), stored as it is.

    ``thumbnails`` is off by default: c2pa would embed a large JPEG of every ingredient, and
    for a face swap that means a copy of the source person's photo inside the output.
    """
    c2pa = _c2pa()
    src, dst = Path(input_path), Path(output_path)
    if src.resolve() == dst.resolve():
        raise ProvenanceError("sign_media cannot sign in place; use sign_and_verify")
    mime = mime_for(dst)
    if mime_for(src) != mime:
        raise ProvenanceError(f"'{src.name}' and '{dst.name}' must be the same format")
    kind = "development" if (dev_signer or creds.is_development) else "configured"
    timings: dict[str, float] = {}

    t = time.perf_counter()
    ingredients = [_ingredient_info(target_ingredient, "parentOf", _TARGET_ID)]
    if source_ingredient is not None:
        ingredients.append(_ingredient_info(source_ingredient, "componentOf", _SOURCE_ID))
    timings["hash_ingredients_s"] = time.perf_counter() - t

    agent = software_agent or f"Swapline {__version__}"
    stages = _stage_entries(stages, models)
    edited = method.edited_actions(stages, agent, _SOURCE_ID if source_ingredient is not None else None)
    qa_payload = _payload(qa_summary, models, stages, attestation, consent, kind, ingredients, agent)
    # c2pa only accepts stream ingredients in formats it parses; anything else is declared
    # in the definition, which keeps title, relationship and hash without reading the file.
    supported = set(c2pa.Builder.get_supported_mime_types())
    declared = [i for i in ingredients if i["format"] not in supported]
    definition = {
        "claim_generator_info": [{"name": "Swapline", "version": __version__}],
        "title": dst.name,
        "ingredients": [_ingredient_json(i) for i in declared],
        "assertions": [
            {"label": "c2pa.actions", "data": {"actions": [
                {"action": "c2pa.opened", "parameters": {"ingredientIds": [_TARGET_ID]}},
                *edited]}},
            {"label": QA_LABEL, "data": qa_payload},
        ],
    }

    t = time.perf_counter()
    ctx = c2pa.Context.from_dict({"builder": {"thumbnail": {"enabled": bool(thumbnails)}}})
    key_pem = creds.read_private_key_pem()
    try:
        signer = c2pa.Signer.from_info(c2pa.C2paSignerInfo(
            creds.algorithm, creds.cert_chain_pem, key_pem, None))
    finally:
        del key_pem   # the native signer holds its own copy; drop ours as early as possible
    with ctx, signer:
        builder = c2pa.Builder(definition, context=ctx)
        with builder:
            for ing in ingredients:
                if not any(ing is d for d in declared):
                    with open(ing["path"], "rb") as f:
                        builder.add_ingredient(_ingredient_json(ing), ing["format"], f)
            with open(src, "rb") as s, open(dst, "w+b") as d:
                manifest = builder.sign(signer, mime, s, d)
                d.flush()
                os.fsync(d.fileno())
    timings["sign_s"] = time.perf_counter() - t
    return SignResult(ok=True, output_path=str(dst), signed=True, signer_kind=kind,
                      signer_fingerprint=creds.fingerprint_sha256, manifest_size=len(manifest),
                      timings=timings, manifest_bytes=manifest)


def verify_media(path, trust_anchors_pem: str | None = None) -> VerifyResult:
    """Read the manifest back and report c2pa's verdict, failure codes and our assertion."""
    c2pa = _c2pa()
    settings: dict[str, Any] = {"verify": {"verify_trust": True}}
    if trust_anchors_pem:
        settings["trust"] = {"user_anchors": trust_anchors_pem}
    try:
        ctx = c2pa.Context.from_dict(settings)
    except c2pa.C2paError as e:
        raise ProvenanceError(f"trust anchors are not usable PEM certificates ({e})") from None
    result = VerifyResult(path=str(path), state="NoManifest", anchors_given=bool(trust_anchors_pem))
    with ctx:
        try:
            reader = c2pa.Reader.try_create(str(path), context=ctx)
            if reader is None:
                return result
            with reader:
                store = json.loads(reader.json())
        except c2pa.C2paError as e:
            # Damage bad enough that c2pa cannot even parse the store is still a verdict.
            result.state, result.error = "Invalid", f"{type(e).__name__}: {e}"
            result.failure_codes = ["swapline.readerError"]
            return result
    _fill_from_store(result, store)
    return result


def sign_and_verify(input_path, output_path=None, *, trust_anchors_pem: str | None = None,
                    require_trusted: bool = False, **sign_kwargs) -> SignResult:
    """Sign to a temp file beside the output, verify it, and only then move it into place.

    On any failure the output holds the unsigned media (in place signing leaves it untouched;
    otherwise the input is copied there) and the result says why: a job's media is never lost
    because provenance failed.

    The read-back is checked against ``trust_anchors_pem`` or else the credentials' own anchors
    (a development signer's own CA), and must then be Trusted; with no anchors at all, Valid
    with only ``signingCredential.untrusted`` is accepted. ``signer_kind`` tells the caller
    whether that trust means anything beyond this machine. ``require_trusted``: only a Trusted
    read-back against configured anchors counts (a signer nobody can verify is a failure).
    """
    creds: SigningCredentials = sign_kwargs["creds"]
    src = Path(input_path)
    dst = Path(output_path) if output_path is not None else src
    kind = ("development" if (sign_kwargs.get("dev_signer") or creds.is_development)
            else "configured")
    result = SignResult(ok=False, output_path=str(dst), signed=False, signer_kind=kind,
                        signer_fingerprint=creds.fingerprint_sha256)
    anchors = trust_anchors_pem or creds.trust_anchors_pem
    tmp: Path | None = None
    try:
        t = time.perf_counter()
        result.input_sha256 = sha256_file(src)
        result.timings["hash_input_s"] = time.perf_counter() - t
        fd, name = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.stem}.signing-",
                                    suffix=dst.suffix)
        os.close(fd)
        tmp = Path(name)
        signed = sign_media(src, tmp, **sign_kwargs)
        result.manifest_size, result.manifest_bytes = signed.manifest_size, signed.manifest_bytes
        result.timings.update(signed.timings)

        t = time.perf_counter()
        check = verify_media(tmp, anchors)
        result.timings["verify_s"] = time.perf_counter() - t
        result.verify, result.validation_state = check, check.state
        result.failure_codes = check.failure_codes
        if require_trusted and (kind == "development" or not anchors):
            raise ProvenanceError("a trusted signer is required, but the signature cannot be verified "
                                  "against a trust anchor: set 'trust_anchors' in signing.json to the "
                                  "root certificate(s) that issued the signing certificate")
        _accept(check, anchors)

        result.output_sha256 = sha256_file(tmp)
        os.replace(tmp, dst)
        tmp = None
        check.path = str(dst)
        _fsync_dir(dst.parent)
        result.ok = result.signed = True
    except Exception as e:   # noqa: BLE001 - the boundary that turns any failure into a report
        result.error = f"Content Credentials not written ({type(e).__name__}: {e}); " \
                       f"'{dst.name}' is kept unsigned"
        try:
            if src.resolve() != dst.resolve():
                _copy_into_place(src, dst)
            result.output_sha256 = sha256_file(dst)
        except Exception as copy_error:  # noqa: BLE001
            result.error += f"; keeping the unsigned copy also failed: {copy_error}"
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
    return result


# ---- internals -------------------------------------------------------------------------------

def _c2pa():
    try:
        import c2pa
    except ImportError as e:   # pragma: no cover - requirements.txt lists it
        raise ProvenanceError("c2pa-python is not installed (pip install 'c2pa-python>=0.38')"
                              ) from e
    return c2pa


def _payload(qa_summary, models, stages, attestation, consent, kind, ingredients, agent) -> dict:
    """The swapline.qa assertion: QA, models, the method per stage, attestation and consent."""
    return {
        "qa": _jsonable(qa_summary),
        "models": [model_entry(m) for m in models],
        "method": {"digital_source_type": method.source_type(stages), "summary": method.summary(stages),
                   "stages": stages},
        "attestation": attestation,
        "consent": _jsonable(consent) if consent else None,
        "signer": {"kind": kind},
        "ingredients": [{"role": i["role"], "title": i["title"], "sha256": i["sha256"]}
                        for i in ingredients],
        "software": agent,
    }


def _stage_entries(stages: list[dict] | None, models: list[dict]) -> list[dict]:
    """The manifest's stages; a caller that recorded none gets one stage saying so."""
    if stages is None:
        stages = [{"stage": "swap", "method": "method not recorded", "generation": "unknown",
                   "models": list(models)}]
    return _jsonable([{**st, "models": [model_entry(m) for m in st.get("models") or []]}
                      for st in stages])


def _ingredient_info(spec: tuple[str, str], relationship: str, label: str) -> dict:
    path, title = spec
    path = Path(path)
    if not path.exists():
        raise ProvenanceError(f"{relationship} ingredient '{path}' does not exist")
    from mimetypes import guess_type
    # a folder of frames (an image-sequence target) is declared, with one digest of its files
    fmt = "inode/directory" if path.is_dir() else MIME_BY_SUFFIX.get(path.suffix.lower()) \
        or guess_type(path.name)[0] or "application/octet-stream"
    return {"path": path, "title": title or path.name, "relationship": relationship,
            "label": label, "format": fmt, "sha256": sha256_media(path),
            "role": "target" if relationship == "parentOf" else "source_face"}


def _ingredient_json(ing: dict) -> dict:
    # "label" is what c2pa.actions' ingredientIds refer to; c2pa swaps in its own label.
    return {"title": ing["title"], "format": ing["format"], "relationship": ing["relationship"],
            "label": ing["label"], "metadata": {INGREDIENT_SHA256_KEY: ing["sha256"]}}


def _jsonable(obj):
    """QA summaries carry numpy scalars and arrays; the manifest needs plain JSON."""
    def default(o):
        if hasattr(o, "tolist"):
            return o.tolist()
        if hasattr(o, "item"):
            return o.item()
        return str(o)
    return json.loads(json.dumps(obj, default=default))


def _codes(entries) -> list[str]:
    return [e["code"] for e in entries or [] if isinstance(e, dict) and "code" in e]


def _dedupe(codes: list[str]) -> list[str]:
    return list(dict.fromkeys(codes))


def _fill_from_store(result: VerifyResult, store: dict) -> None:
    result.state = store.get("validation_state") or "Invalid"
    vr = store.get("validation_results")
    if vr:
        result.failure_codes = _dedupe(_codes((vr.get("activeManifest") or {}).get("failure")))
        deltas = vr.get("ingredientDeltas") or []
        result.ingredient_failure_codes = _dedupe(
            [c for d in deltas for c in _codes((d.get("validationDeltas") or {}).get("failure"))])
    else:
        # Older stores only carry the flat validation_status list.
        result.failure_codes = _dedupe(_codes(store.get("validation_status")))
    active = (store.get("manifests") or {}).get(store.get("active_manifest") or "", {})
    for ing in active.get("ingredients") or []:
        result.ingredients.append({
            "title": ing.get("title"), "relationship": ing.get("relationship"),
            "format": ing.get("format"), "label": ing.get("label"),
            "sha256": (ing.get("metadata") or {}).get(INGREDIENT_SHA256_KEY),
            "has_manifest": bool(ing.get("active_manifest"))})
    for a in active.get("assertions") or []:
        label = a.get("label", "")
        if label == QA_LABEL and result.qa is None:
            result.qa = a.get("data")
        elif label.startswith("c2pa.actions"):
            result.actions.extend((a.get("data") or {}).get("actions") or [])
    result.signature = active.get("signature_info") or {}
    result.claim_generator = active.get("claim_generator_info") or []


def _accept(check: VerifyResult, anchors: str | None) -> None:
    if check.state == "Trusted":
        return
    if anchors:
        raise ProvenanceError(f"read-back state is {check.state}, expected Trusted against the "
                              f"configured trust anchors (codes: {', '.join(check.failure_codes)})")
    if check.state == "Valid" and set(check.failure_codes) <= TRUST_ONLY_CODES:
        return
    raise ProvenanceError(f"read-back state is {check.state} "
                          f"(codes: {', '.join(check.failure_codes) or check.error})")


def _copy_into_place(src: Path, dst: Path) -> None:
    fd, name = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.stem}.unsigned-",
                                suffix=dst.suffix)
    os.close(fd)
    try:
        shutil.copyfile(src, name)
        os.replace(name, dst)
    finally:
        if os.path.exists(name):
            os.unlink(name)


def _fsync_dir(folder: Path) -> None:
    # Makes the rename itself durable; not possible (or needed) on Windows.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
