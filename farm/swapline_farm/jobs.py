"""Jobs: what a manifest asks for, checked up front, with a content-derived id.

A job is one clip, one source identity (face image(s) or one saved ``.safetensors`` face model),
one API-format workflow and its setting overrides. Its id is a hash of the *content* of all of
these (clip bytes, face file bytes, the canonical workflow JSON, the sorted settings and the
resolved input roles), so submitting the same manifest twice names the same jobs and runs them
once; an explicit ``idempotency_key`` replaces the content hash (e.g. a studio's own shot id).

Manifest (YAML or JSON; relative paths resolve against the manifest's folder)::

    defaults:                         # optional; any job field except clip / idempotency_key
      workflow: video_swap_builtin    # a shipped workflows/api/<name>.json, or a path
      faces: [faces/alice.png]
      priority: normal
    jobs:
      - clip: clips/shot_010.mp4
        settings: {"9.color_match": false}    # "<node id>.<input name>": value
        priority: rush
        webhook: https://hooks.example/swapline
        destination: /mnt/delivery/alice
      - clip: clips/shot_020.mp4
        face: faces/alice.safetensors         # "face" is "faces" with one entry
        inputs: {video: "1", source: "2", output: "11"}

Every problem is a :class:`ManifestError` naming the manifest, the field (``jobs[1].clip``) and
what to do; nothing is submitted from a manifest with an error.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import swapline_core
from swapline_core.provenance.hashing import sha256_file
from swapline_core.video.probe import FOLDER_EXTS, natural_key

PRIORITIES = ("rush", "normal", "bulk")        # rush never waits behind bulk
FARM_SETTINGS = ("chunk_frames", "preroll", "timeout_s")   # "farm.<name>" settings (swapline_farm.prompts)
FACE_IMAGE_EXTS = frozenset({".png", ".jpg", ".jpeg", ".webp", ".bmp"})
FACE_MODEL_EXTS = frozenset({".safetensors"})
ROLES = ("video", "source", "output")
VIDEO_NODES = ("SwaplineLoadVideo",)           # the node whose start/count the farm sets per chunk
SOURCE_NODES = ("LoadImage", "SwaplineLoadFaceModel")
OUTPUT_NODES = ("SwaplineC2PASink", "SwaplineSaveVideo", "SaveVideo")
JOB_FIELDS = ("clip", "faces", "face", "workflow", "inputs", "settings", "priority", "webhook",
              "destination", "idempotency_key")
DEFAULT_FIELDS = tuple(f for f in JOB_FIELDS if f not in ("clip", "idempotency_key"))
# Beside the core the farm imports (the repository root), wherever the farm itself is installed.
SHIPPED_WORKFLOWS = Path(swapline_core.__file__).resolve().parents[1] / "workflows" / "api"
_ID_VERSION = b"swapline-farm.job.v1"
_ID_HEX = 32                                   # 128 bits: collision-free for any studio's lifetime


class ManifestError(ValueError):
    """A manifest problem: ``manifest`` file, ``field`` (e.g. ``jobs[2].clip``) and the fix."""

    def __init__(self, manifest: str | os.PathLike | None, field_name: str | None, problem: str):
        self.manifest = None if manifest is None else str(manifest)
        self.field = field_name
        where = ", ".join(p for p in (f"manifest '{self.manifest}'" if self.manifest else None,
                                      f"field '{field_name}'" if field_name else None) if p)
        super().__init__(f"{where}: {problem}" if where else problem)


@dataclass(frozen=True)
class JobSpec:
    job_id: str             # content-derived (see module docstring) or from idempotency_key
    clip: Path
    faces: tuple[Path, ...]  # source face image(s) or one saved face model (.safetensors)
    workflow: Path          # an API-format workflow JSON
    inputs: dict            # role -> node id: "video", "source", optional "output"
    settings: dict          # {"<node id>.<input name>": value} overrides
    priority: str = "normal"
    webhook: str | None = None
    destination: Path | None = None
    idempotency_key: str | None = None

    def __hash__(self) -> int:          # the dict fields are unhashable; the id names the job
        return hash(self.job_id)

    def to_json(self) -> dict:
        """Plain JSON (for ledgers and Ray); :meth:`from_json` restores it."""
        return {"job_id": self.job_id, "clip": str(self.clip), "faces": [str(f) for f in self.faces],
                "workflow": str(self.workflow), "inputs": dict(self.inputs),
                "settings": dict(self.settings), "priority": self.priority, "webhook": self.webhook,
                "destination": None if self.destination is None else str(self.destination),
                "idempotency_key": self.idempotency_key}

    @classmethod
    def from_json(cls, d: dict) -> JobSpec:
        return cls(job_id=d["job_id"], clip=Path(d["clip"]), faces=tuple(Path(f) for f in d["faces"]),
                   workflow=Path(d["workflow"]), inputs=dict(d["inputs"]), settings=dict(d["settings"]),
                   priority=d.get("priority", "normal"), webhook=d.get("webhook"),
                   destination=None if d.get("destination") is None else Path(d["destination"]),
                   idempotency_key=d.get("idempotency_key"))

    @property
    def uses_face_model(self) -> bool:
        return len(self.faces) == 1 and self.faces[0].suffix.lower() in FACE_MODEL_EXTS

    def load_workflow(self) -> dict:
        return read_workflow(self.workflow)


# -- content hashes -------------------------------------------------------------------------
_hash_cache: dict[tuple, str] = {}
_hash_lock = threading.Lock()


def content_hash(path: str | os.PathLike) -> str:
    """sha256 of a file's bytes, or of a folder's image names and bytes (natural order).

    Cached per (path, size, mtime) so resubmitting a manifest of large clips does not re-read them.
    """
    p = Path(os.path.abspath(path))
    if p.is_dir():
        files = sorted((f for f in p.iterdir() if f.is_file() and f.suffix.lower() in FOLDER_EXTS
                        and not f.name.startswith(".")), key=lambda f: natural_key(f.name))
        stamp = tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    else:
        st = p.stat()
        files, stamp = [p], (st.st_size, st.st_mtime_ns)
    key = (str(p), stamp)
    with _hash_lock:
        hit = _hash_cache.get(key)
    if hit is not None:
        return hit
    if p.is_dir():
        h = hashlib.sha256()
        for f in files:
            h.update(f.name.encode() + b"\0" + sha256_file(f).encode() + b"\0")
        digest = h.hexdigest()
    else:
        digest = sha256_file(p)
    with _hash_lock:
        _hash_cache[key] = digest
    return digest


def canonical_json(value) -> bytes:
    """One byte string per value: sorted keys, no whitespace (so formatting never changes an id)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def job_id(clip, faces, workflow, settings, idempotency_key: str | None = None, *,
           inputs: dict | None = None) -> str:
    """The job's id: 32 hex digits of sha256 over the content, or of ``idempotency_key``.

    ``workflow`` is a path to the API JSON or the loaded dict (hashed as canonical JSON, so
    whitespace and key order do not matter); ``faces`` keep their order (the largest face among
    several source images becomes the reference image, so order can matter).
    """
    if idempotency_key is not None:
        if not str(idempotency_key).strip():
            raise ValueError("idempotency_key must be a non-empty string")
        return hashlib.sha256(_ID_VERSION + b"\0key\0" + str(idempotency_key).encode()).hexdigest()[:_ID_HEX]
    wf = workflow if isinstance(workflow, dict) else read_workflow(workflow)
    h = hashlib.sha256(_ID_VERSION)
    h.update(b"\0clip\0" + content_hash(clip).encode())
    for f in faces:
        h.update(b"\0face\0" + content_hash(f).encode())
    h.update(b"\0workflow\0" + canonical_json(wf))
    h.update(b"\0settings\0" + canonical_json({k: _setting_identity(v) for k, v in dict(settings or {}).items()}))
    if inputs:
        h.update(b"\0inputs\0" + canonical_json(dict(inputs)))
    return h.hexdigest()[:_ID_HEX]


def _setting_identity(value):
    """A file-valued setting counts by its content (the same image elsewhere is the same job)."""
    if isinstance(value, str) and os.path.isabs(value) and os.path.isfile(value):
        return "sha256:" + content_hash(value)
    return value


# -- workflows ------------------------------------------------------------------------------
def read_workflow(path: str | os.PathLike, manifest=None, field_name: str | None = None) -> dict:
    """An API-format workflow ({node id: {"class_type", "inputs"}}); the UI format is refused."""
    p = Path(path)
    try:
        wf = json.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise ManifestError(manifest, field_name, f"workflow '{p}' cannot be read ({e.strerror or e})") from None
    except json.JSONDecodeError as e:
        raise ManifestError(manifest, field_name, f"workflow '{p}' is not valid JSON (line {e.lineno}, "
                                                  f"column {e.colno}: {e.msg})") from None
    if isinstance(wf, dict) and "nodes" in wf and "links" in wf:
        raise ManifestError(manifest, field_name, f"workflow '{p}' is in ComfyUI's UI format; the farm needs "
                                                  "the API format: in ComfyUI use Workflow > Export (API)")
    bad = [k for k, v in (wf.items() if isinstance(wf, dict) else [])
           if not (isinstance(v, dict) and isinstance(v.get("class_type"), str) and isinstance(v.get("inputs"), dict))]
    if not isinstance(wf, dict) or not wf or bad:
        raise ManifestError(manifest, field_name, f"workflow '{p}' is not an API-format workflow (a JSON object of "
                                                  "node id -> {class_type, inputs})"
                            + (f"; node {bad[0]!r} lacks class_type/inputs" if bad else ""))
    return wf


def _link(value) -> str | None:
    """The upstream node id of an API link ``[node_id, output_index]``."""
    if isinstance(value, list) and len(value) == 2 and isinstance(value[0], (str, int)) and isinstance(value[1], int):
        return str(value[0])
    return None


def _default_source(wf: dict) -> list[str]:
    """Source nodes feeding a swap node's ``face_model`` (directly or through Build Face Model)."""
    found = []
    for node in wf.values():
        if not node["class_type"].startswith("SwaplineSwap"):
            continue
        up = _link(node["inputs"].get("face_model"))
        if up is None or up not in wf:
            continue
        cls = wf[up]["class_type"]
        if cls == "SwaplineLoadFaceModel":
            found.append(up)
        elif cls == "SwaplineBuildFaceModel":
            img = _link(wf[up]["inputs"].get("images"))
            if img in wf and wf[img]["class_type"] in SOURCE_NODES:
                found.append(img)
    return sorted(set(found), key=natural_key)


def resolve_inputs(wf: dict, given: dict, manifest=None, prefix: str = "") -> dict:
    """Role -> node id, from ``given`` or found by class_type; refuses wrong or ambiguous nodes."""
    unknown = sorted(set(given) - set(ROLES))
    if unknown:
        raise ManifestError(manifest, f"{prefix}inputs.{unknown[0]}", f"unknown role; roles are {', '.join(ROLES)}")
    out = {}
    wanted = {"video": VIDEO_NODES, "source": SOURCE_NODES, "output": None}
    for role, classes in wanted.items():
        fld = f"{prefix}inputs.{role}"
        if role in given:
            nid = str(given[role])
            if nid not in wf:
                raise ManifestError(manifest, fld, f"node '{nid}' is not in the workflow (its nodes: "
                                                   f"{', '.join(sorted(wf, key=natural_key))})")
            if classes and wf[nid]["class_type"] not in classes:
                raise ManifestError(manifest, fld, f"node '{nid}' is a {wf[nid]['class_type']}; the {role} input "
                                                   f"must be a {' or '.join(classes)} node")
            out[role] = nid
            continue
        if role == "video":
            cands = [k for k, v in wf.items() if v["class_type"] in VIDEO_NODES]
        elif role == "source":
            cands = _default_source(wf) or [k for k, v in wf.items() if v["class_type"] in SOURCE_NODES]
        else:
            cands = [k for k, v in wf.items() if v["class_type"] in OUTPUT_NODES]
        if len(cands) == 1:
            out[role] = cands[0]
        elif len(cands) > 1:
            raise ManifestError(manifest, fld, f"the workflow has several candidate nodes ({', '.join(cands)}); "
                                               f"name the {role} node, e.g. inputs: {{{role}: \"{cands[0]}\"}}")
        elif role == "video":
            raise ManifestError(manifest, fld, "the workflow has no SwaplineLoadVideo node: the farm sets each "
                                               "chunk's frame range on it (replace ComfyUI's Load Video with "
                                               "Swapline's Load Video, or name the node in inputs.video)")
        elif role == "source":
            raise ManifestError(manifest, fld, "the workflow has no LoadImage or SwaplineLoadFaceModel node "
                                               "for the source face; add one or name it in inputs.source")
    return out


def check_settings(wf: dict, settings: dict, manifest=None, prefix: str = "", base: Path | None = None) -> dict:
    """``{"<node id>.<input>": scalar}``; the node and input must exist (typos fail here, not on a worker)."""
    if not isinstance(settings, dict):
        raise ManifestError(manifest, f"{prefix}settings", "must be a mapping of \"<node id>.<input name>\": value")
    out = {}
    for key, value in settings.items():
        fld = f"{prefix}settings.{key}"
        nid, dot, name = str(key).partition(".")
        if nid == "farm":
            # the farm's own per-job settings (swapline_farm.prompts.FARM_SETTING), not node inputs
            if name not in FARM_SETTINGS or not isinstance(value, (int, float)) or isinstance(value, bool):
                raise ManifestError(manifest, fld, f"farm settings are {', '.join(FARM_SETTINGS)}, each a number")
            out[str(key)] = value
            continue
        if not dot or not nid or not name:
            raise ManifestError(manifest, fld, "keys are \"<node id>.<input name>\", e.g. \"9.color_match\"")
        if nid not in wf:
            raise ManifestError(manifest, fld, f"node '{nid}' is not in the workflow")
        inputs = wf[nid]["inputs"]
        if name not in inputs:
            raise ManifestError(manifest, fld, f"node '{nid}' ({wf[nid]['class_type']}) has no input '{name}' "
                                               f"(its inputs: {', '.join(sorted(inputs))})")
        if _link(inputs[name]) is not None:
            raise ManifestError(manifest, fld, f"'{name}' of node '{nid}' is a link to another node, not a "
                                               "setting; change the workflow instead")
        if not (value is None or isinstance(value, (str, int, float, bool))):
            raise ManifestError(manifest, fld, f"must be a string, number or boolean, not {type(value).__name__}")
        if isinstance(value, str) and base is not None and value.strip() and (base / value).is_file():
            # a file next to the manifest (e.g. a LoadImage's image): absolute, so the coordinator can
            # stage it onto each worker; the job id hashes its bytes, not where it lies
            value = str((base / value).resolve())
        out[str(key)] = value
    return dict(sorted(out.items()))


# -- manifests ------------------------------------------------------------------------------
def _read_manifest(p: Path):
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError(p, None, f"file not found (searched '{p.resolve()}')") from None
    except OSError as e:
        raise ManifestError(p, None, f"cannot be read ({e.strerror or e})") from None
    if p.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise ManifestError(p, None, f"not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise ManifestError(p, None, f"not valid YAML{where}: {getattr(e, 'problem', e)}") from None


def _path(base: Path, raw, manifest, fld: str, what: str, must_exist: bool = True) -> Path:
    if not isinstance(raw, (str, os.PathLike)) or not str(raw).strip():
        raise ManifestError(manifest, fld, f"must be a path to the {what}")
    p = Path(os.path.expanduser(str(raw).strip()))
    p = p if p.is_absolute() else base / p
    p = Path(os.path.abspath(p))
    if must_exist and not p.exists():
        raise ManifestError(manifest, fld, f"{what} not found: searched '{p}' ('{raw}' is resolved against the "
                                           f"manifest's folder '{base}'); fix the path or copy the file there")
    return p


def _workflow_path(base: Path, raw, manifest, fld: str) -> Path:
    if not isinstance(raw, str) or not raw.strip():
        raise ManifestError(manifest, fld, "must be a workflow path or the name of a shipped API workflow")
    local = Path(os.path.abspath(base / os.path.expanduser(raw.strip())))
    tried = [local]
    if not local.exists() and "/" not in raw and "\\" not in raw:
        name = raw.strip() if raw.strip().endswith(".json") else raw.strip() + ".json"
        shipped = SHIPPED_WORKFLOWS / name
        tried.append(shipped)
        if shipped.is_file():
            return shipped
    if not local.is_file():
        names = ", ".join(sorted(f.stem for f in SHIPPED_WORKFLOWS.glob("*.json")))
        raise ManifestError(manifest, fld, f"workflow not found: searched {', '.join(repr(str(t)) for t in tried)}; "
                                           f"give a path (relative to the manifest) or a shipped one: {names}")
    return local


def _faces(base: Path, job: dict, manifest, prefix: str) -> tuple[Path, ...]:
    if "face" in job and "faces" in job:
        raise ManifestError(manifest, f"{prefix}face", "give either 'face' or 'faces', not both")
    fld = f"{prefix}faces" if "faces" in job else f"{prefix}face"
    raw = job.get("faces", job.get("face"))
    if raw is None:
        raise ManifestError(manifest, f"{prefix}faces", "missing: give the source face image(s) or one saved face "
                                                        "model (.safetensors), here or under 'defaults'")
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not items:
        raise ManifestError(manifest, fld, "must be a path or a non-empty list of paths")
    paths = tuple(_path(base, r, manifest, f"{fld}[{i}]", "face file") for i, r in enumerate(items))
    for i, p in enumerate(paths):
        ext = p.suffix.lower()
        if ext in FACE_MODEL_EXTS and len(paths) > 1:
            raise ManifestError(manifest, f"{fld}[{i}]",
                                "a saved face model (.safetensors) must be the only face entry")
        if ext not in FACE_MODEL_EXTS | FACE_IMAGE_EXTS or not p.is_file():
            kinds = ", ".join(sorted(FACE_IMAGE_EXTS))
            raise ManifestError(manifest, f"{fld}[{i}]",
                                f"'{p.name}' is not a face image ({kinds}) or .safetensors face model")
    return paths


def build_job(job: dict, base: Path, manifest=None, prefix: str = "") -> JobSpec:
    """One JobSpec from a job mapping (defaults already merged); every field checked."""
    unknown = sorted(set(job) - set(JOB_FIELDS))
    if unknown:
        raise ManifestError(manifest, f"{prefix}{unknown[0]}", f"unknown field; job fields are {', '.join(JOB_FIELDS)}")
    if "clip" not in job:
        raise ManifestError(manifest, f"{prefix}clip", "missing: every job needs the clip to process")
    clip = _path(base, job["clip"], manifest, f"{prefix}clip", "clip")
    faces = _faces(base, job, manifest, prefix)
    if "workflow" not in job:
        raise ManifestError(manifest, f"{prefix}workflow", "missing: name an API workflow here or under 'defaults'")
    wf_path = _workflow_path(base, job["workflow"], manifest, f"{prefix}workflow")
    wf = read_workflow(wf_path, manifest, f"{prefix}workflow")
    given_inputs = job.get("inputs") or {}
    if not isinstance(given_inputs, dict):
        raise ManifestError(manifest, f"{prefix}inputs", "must be a mapping role -> node id")
    inputs = resolve_inputs(wf, given_inputs, manifest, prefix)
    src_cls = wf[inputs["source"]]["class_type"]
    model = faces[0].suffix.lower() in FACE_MODEL_EXTS
    if model != (src_cls == "SwaplineLoadFaceModel"):
        takes, give = ("an image", "face image(s)") if model else ("a face model", "a .safetensors face model")
        raise ManifestError(manifest, f"{prefix}faces", f"the workflow's source node '{inputs['source']}' is a "
                                                        f"{src_cls}, which takes {takes}; give {give} or another "
                                                        "workflow")
    settings = check_settings(wf, job.get("settings") or {}, manifest, prefix, base)
    priority = job.get("priority", "normal")
    if priority not in PRIORITIES:
        raise ManifestError(manifest, f"{prefix}priority", f"'{priority}' is not one of {', '.join(PRIORITIES)}")
    webhook = job.get("webhook")
    if webhook is not None and not (isinstance(webhook, str) and webhook.startswith(("http://", "https://"))):
        raise ManifestError(manifest, f"{prefix}webhook", "must be an http:// or https:// URL")
    dest = job.get("destination")
    destination = None if dest is None else _path(base, dest, manifest, f"{prefix}destination", "destination",
                                                 must_exist=False)
    key = job.get("idempotency_key")
    if key is not None and (not isinstance(key, (str, int)) or not str(key).strip()):
        raise ManifestError(manifest, f"{prefix}idempotency_key", "must be a non-empty string")
    key = None if key is None else str(key)
    jid = job_id(clip, faces, wf, settings, key, inputs=inputs)
    return JobSpec(job_id=jid, clip=clip, faces=faces, workflow=wf_path, inputs=inputs, settings=settings,
                   priority=priority, webhook=webhook, destination=destination, idempotency_key=key)


def load_manifest(path: str | os.PathLike) -> list[JobSpec]:
    """All jobs of a YAML/JSON manifest, in order; a job listed twice (same id) is kept once."""
    p = Path(path)
    data = _read_manifest(p)
    if isinstance(data, list):
        data = {"jobs": data}
    if not isinstance(data, dict):
        raise ManifestError(p, None, "must be a mapping with a 'jobs' list (and optional 'defaults')")
    unknown = sorted(set(data) - {"jobs", "defaults"})
    if unknown:
        raise ManifestError(p, unknown[0], "unknown top-level field; a manifest has 'jobs' and optional 'defaults'")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise ManifestError(p, "defaults", "must be a mapping of job fields")
    bad = sorted(set(defaults) - set(DEFAULT_FIELDS))
    if bad:
        raise ManifestError(p, f"defaults.{bad[0]}", f"not allowed in defaults (allowed: {', '.join(DEFAULT_FIELDS)})")
    jobs = data.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise ManifestError(p, "jobs", "must be a non-empty list of jobs")
    base = Path(os.path.abspath(p)).parent
    out: dict[str, JobSpec] = {}
    for i, job in enumerate(jobs):
        if not isinstance(job, dict):
            raise ManifestError(p, f"jobs[{i}]", "must be a mapping (clip, faces, workflow, ...)")
        own_faces = "face" in job or "faces" in job        # the job's faces replace the default ones
        merged = {k: v for k, v in defaults.items() if not (own_faces and k in ("face", "faces"))}
        merged.update(job)
        for k in ("settings", "inputs"):          # mappings merge: the job's keys win
            if isinstance(defaults.get(k), dict) and isinstance(job.get(k), dict):
                merged[k] = {**defaults[k], **job[k]}
        spec = build_job(merged, base, p, f"jobs[{i}].")
        out.setdefault(spec.job_id, spec)
    return list(out.values())


def node_inputs(job: JobSpec, node_id: str, wf: dict | None = None) -> dict:
    """A node's inputs as the job runs it: the workflow's values with the job's settings applied."""
    wf = wf if wf is not None else job.load_workflow()
    out = dict(wf[node_id]["inputs"])
    prefix = f"{node_id}."
    out.update({k[len(prefix):]: v for k, v in job.settings.items() if k.startswith(prefix)})
    return out


def frame_range(job: JobSpec, wf: dict | None = None) -> tuple[int, int, int]:
    """(start, count, stride) the job's video node reads; count 0 = to the end of the clip."""
    v = node_inputs(job, job.inputs["video"], wf)
    return int(v.get("start", 0) or 0), int(v.get("count", 0) or 0), int(v.get("stride", 1) or 1)
