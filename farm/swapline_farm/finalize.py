"""Finish a job on the coordinator: QA on the whole stitched clip, sign once, one audit line.

What QA covers here (and why it differs from the in-workflow QA Gate):
- It runs the core's gate (``swapline_core.qa.gate.run_qa``: identity, leakage, landmark drift,
  flicker, expression, occluder overwrite, colour cast, seams, bleed, off-face, coverage) on
  the *stitched* clip against the original, frame for frame and continuously, so the frames
  on both sides of every chunk seam are compared with each other (flicker, expression window)
  exactly as in a single-server run.
- The coordinator has no worker's face tracks or analyzer, so it re-tracks the original clip
  with the core's built-in analyzer (MTCNN + dlib, CPU, models shipped in pip packages) using
  the workflow's Track Faces settings. Identity mode needs the target reference face, which lives
  in a worker's ComfyUI input folder: give it as ``qa={"reference": image}``, otherwise QA
  tracks the largest faces (``max_faces`` of the workflow). The source identity is rebuilt from
  the job's face image(s) with the same analyzer (embeddings of different recognizers cannot be
  compared); a saved face model from another recognizer is rebuilt from the image it carries.
  If that is impossible, QA is reported as ``"skipped"`` with the reason, never as passed.
- Thresholds are the calibrated defaults of the built-in recognizer; the workflow's QA Gate
  limits (``sample_every``, ``require_redetection``, ``allow_no_face`` and, when the workflow
  itself uses the built-in analyzer, its numeric limits, read from a QA Limit Overrides node linked
  to the gate or, in prompts written before that node, the gate's own inputs) are applied;
  ``qa={...}`` overrides.
- The result is a verdict, not a repair: the stitched stream is not re-encoded, so failing
  frames are not reverted here (the workflow's own gate did that per chunk with its policy).
  ``qa={"fail_job": True}`` refuses to sign and deliver a clip whose decision is "fail".

Signing happens only here: the key is read on the coordinator (``signing`` names the
credentials) and never travels to a worker. The audit log ``<out_dir>/swapline_audit.jsonl``
gets exactly one line per job: a repeated ``finalize_job`` of a job already logged returns the
logged result instead of signing or logging again.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from pathlib import Path

from swapline_core import __version__ as core_version
from swapline_core.provenance import audit_log
from swapline_core.provenance import signing as signing_config
from swapline_core.provenance.c2pa import sign_and_verify
from swapline_core.provenance.hashing import sha256_file

from .jobs import FACE_MODEL_EXTS, JobSpec, frame_range, node_inputs

TRACK_KEYS = ("mode", "threshold", "max_faces", "detect_every", "max_missing", "smoothing")
QA_FLAGS = ("sample_every", "require_redetection", "allow_no_face")
QA_LIMITS = ("min_identity", "max_leakage", "max_landmark_drift", "max_flicker_ratio", "max_mouth_delta",
             "min_expression_corr", "max_occluder_overwrite", "max_colour_cast", "max_seam_ratio", "max_bleed",
             "max_offface", "min_coverage", "max_blotch", "max_chroma_blotch", "max_detail_ratio",
             "max_texture_excess")
QA_OVERRIDES = "SwaplineQALimitOverrides"  # its limits reach the gate's 'limits' input
QA_OPTIONS = frozenset({"enabled", "fail_job", "track", "limits", "reference", *QA_FLAGS})
BUILTIN_PACK = "builtin"
_job_locks: dict[str, threading.Lock] = {}
_guard = threading.Lock()


class FinalizeError(RuntimeError):
    """The stitched clip cannot be finalized (wrong frame count, QA failure with fail_job...)."""


def output_name(job: JobSpec) -> str:
    return f"{job.clip.stem}_{job.job_id[:12]}.mp4"


def _nodes(wf: dict, cls: str) -> list[str]:
    return [k for k, v in wf.items() if v["class_type"] == cls]


def qa_options(job: JobSpec, wf: dict, given: dict | None) -> dict:
    """QA settings from the workflow's Track Faces / QA Gate nodes, then ``given`` on top."""
    opts: dict = {"enabled": True, "fail_job": False, "track": {"mode": "largest", "max_faces": 1},
                  "limits": {}, "sample_every": 1, "require_redetection": True, "allow_no_face": False}
    track = _nodes(wf, "SwaplineTrackFaces")
    if track:
        t = node_inputs(job, track[0], wf)
        opts["track"].update({k: t[k] for k in TRACK_KEYS if k in t and not isinstance(t[k], list)})
    gate = _nodes(wf, "SwaplineQAGate")
    if gate:
        g = node_inputs(job, gate[0], wf)
        opts.update({k: g[k] for k in QA_FLAGS if k in g})
        analyzers = [node_inputs(job, a, wf).get("pack", "") for a in _nodes(wf, "SwaplineAnalyzerLoader")]
        if analyzers and all(str(p).startswith(BUILTIN_PACK) for p in analyzers):
            # Same recognizer as the workflow's gate: its limits mean the same here (-1 = default).
            # the gate's own limits (prompts written before QA Limit Overrides), then that node's
            src = g.get("limits")
            if isinstance(src, list) and src and wf.get(str(src[0]), {}).get("class_type") == QA_OVERRIDES:
                g = {**g, **node_inputs(job, str(src[0]), wf)}
            opts["limits"] = {k: g[k] for k in QA_LIMITS if isinstance(g.get(k), (int, float)) and g[k] != -1}
    unknown = sorted(set(given or {}) - QA_OPTIONS)
    if unknown:
        raise ValueError(f"qa: unknown option {unknown[0]!r}; options are {', '.join(sorted(QA_OPTIONS))}")
    for k, v in (given or {}).items():
        if k == "track":
            opts["track"].update(v)
        elif k == "limits":
            opts["limits"].update(v)
        else:
            opts[k] = v
    return opts


def _source_identity(job: JobSpec, analyzer):
    """(identity, None) built with ``analyzer``, or (None, why not)."""
    import numpy as np
    from PIL import Image

    from swapline_core.faces import identity

    if job.faces[0].suffix.lower() in FACE_MODEL_EXTS:
        sid = identity.load(str(job.faces[0]))
        if sid.recognizer == analyzer.recognizer_name:
            return sid, None
        if sid.image is None:
            return None, (f"the face model '{job.faces[0].name}' was made with '{sid.recognizer}' and carries no "
                          f"source image to re-embed with the QA analyzer's '{analyzer.recognizer_name}'")
        return identity.build_from_images(analyzer, [sid.image]), None
    images = [np.array(Image.open(f).convert("RGB")) for f in job.faces]
    return identity.build_from_images(analyzer, images), None


def run_clip_qa(job: JobSpec, stitched: Path, work_dir: Path, opts: dict, analyzer=None) -> dict:
    """The QA report of ``stitched`` against the job's original clip (see the module docstring)."""
    from dataclasses import replace

    import numpy as np
    from PIL import Image

    from swapline_core.faces import identity
    from swapline_core.qa import gate
    from swapline_core.video import stages
    from swapline_core.video.frames import FrameSequence

    if analyzer is None:
        from swapline_core.backends.builtin_analyzer import BuiltinAnalyzer
        analyzer = BuiltinAnalyzer()
    start, count, stride = frame_range(job)
    orig = FrameSequence.open(str(job.clip), start, count, stride)
    swapped = FrameSequence.open(str(stitched))
    if swapped.count != orig.count:
        raise FinalizeError(f"the stitched clip '{stitched.name}' has {swapped.count} frames but the job's range of "
                            f"'{job.clip.name}' has {orig.count}: refusing to sign a video with a changed frame count")
    swapped = replace(swapped, chunk=orig.chunk)
    source, why = _source_identity(job, analyzer)
    if source is None:
        return {"decision": "skipped", "summary": {"decision": "skipped", "reason": why}, "frames": []}
    track = dict(opts["track"])
    reference = None
    if track.get("mode") == "identity":
        ref = opts.get("reference")
        if ref:
            ref_rgb = np.array(Image.open(ref).convert("RGB"))
            reference = identity.build_from_images(analyzer, [ref_rgb]).embedding
        else:
            track["mode"] = "largest"     # the target reference lives on a worker (module docstring)
    track.pop("reference", None)
    hooks = stages.Hooks()
    faces, _ = stages.track_faces(orig, analyzer, str(work_dir), hooks, reference=reference, **track)
    th = gate.thresholds_for(analyzer.recognizer_name, require_redetection=bool(opts["require_redetection"]),
                             allow_no_face=bool(opts["allow_no_face"]), **opts["limits"])
    report = gate.run_qa(orig, swapped, faces, source, analyzer, th, hooks,
                         sample_every=int(opts["sample_every"]), store_root=str(work_dir))
    report["scope"] = {"where": "coordinator", "clip": "whole stitched clip, seams included",
                       "tracking": f"re-tracked with {analyzer.name} ({track.get('mode')})",
                       "frames": swapped.count}
    return report


def _credentials(signing: dict):
    unknown = sorted(set(signing) - {"config", "user_dir", "require_trusted", "attestation", "trust_anchors"})
    if unknown:
        raise ValueError(f"signing: unknown field {unknown[0]!r} (config, user_dir, require_trusted, attestation, "
                         "trust_anchors)")
    if signing.get("config"):
        return signing_config.load_config(signing["config"])
    if signing.get("user_dir"):
        return signing_config.load_signing_credentials(signing["user_dir"],
                                                       require_trusted=bool(signing.get("require_trusted")))
    raise ValueError("signing needs 'config' (a signing.json) or 'user_dir' (its ComfyUI user folder)")


def _logged(out_dir: Path, job_id: str) -> dict | None:
    for rec in audit_log.read_audit_log(audit_log.audit_log_path(out_dir)).records:
        if rec.get("job_id") == job_id:
            return rec
    return None


def finalize_job(job: JobSpec, stitched: Path, out_dir: Path, signing: dict | None, *,
                 qa: dict | None = None, analyzer=None, models: list[dict] | None = None) -> dict:
    """QA the stitched clip, sign it once into ``out_dir``, append one audit line.

    ``signing``: None (deliver unsigned; the audit line says so) or ``{"config": signing.json}``
    / ``{"user_dir": dir}`` (development signer there), optional ``require_trusted``,
    ``attestation``, ``trust_anchors`` (PEM file). ``qa``: overrides of :func:`qa_options`
    (``enabled``, ``fail_job``, ``sample_every``, ``reference``, ``track``, ``limits``).
    ``models``: what the workers loaded ({name, sha256, ...}), recorded in manifest and audit.

    Returns ``{"output", "qa", "qa_decision", "qa_report", "signed", "signer_kind",
    "validation_state", "signing_error", "output_sha256", "audit_log", "already_final"}``.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stitched = Path(stitched)
    output = out_dir / output_name(job)
    report_path = out_dir / f"{output.stem}_qa.json"
    with _guard:
        lock = _job_locks.setdefault(f"{out_dir.resolve()}\0{job.job_id}", threading.Lock())
    with lock:
        done = _logged(out_dir, job.job_id)
        if done is not None:
            qa_report = json.loads(report_path.read_text()) if report_path.is_file() else None
            return {"output": str(output), "qa": qa_report, "qa_decision": done.get("qa_decision"),
                    "qa_report": str(report_path) if qa_report is not None else None,
                    "signed": bool(done.get("signed")), "signer_kind": done.get("signer_kind"),
                    "validation_state": done.get("validation_state"), "signing_error": done.get("signing_error"),
                    "output_sha256": done.get("output_sha256"),
                    "audit_log": str(audit_log.audit_log_path(out_dir)), "already_final": True}
        return _finalize(job, stitched, out_dir, output, report_path, signing, qa, analyzer, models)


def _finalize(job, stitched, out_dir, output, report_path, signing, qa, analyzer, models) -> dict:
    wf = job.load_workflow()
    opts = qa_options(job, wf, qa)
    # credentials first: a bad signing config fails in a second, not after minutes of QA
    creds = _credentials(signing) if signing else None
    work = Path(tempfile.mkdtemp(prefix=f".qa-{job.job_id[:12]}-", dir=out_dir))
    try:
        if opts["enabled"]:
            report = run_clip_qa(job, stitched, work, opts, analyzer)
        else:
            report = {"decision": "skipped", "summary": {"decision": "skipped", "reason": "disabled by qa options"},
                      "frames": []}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    decision = report["decision"]
    tmp_report = report_path.with_name(f".{report_path.name}.partial")
    tmp_report.write_text(json.dumps(report, indent=1, default=str))
    os.replace(tmp_report, report_path)
    if opts["fail_job"] and decision == "fail":
        raise FinalizeError(f"job {job.job_id}: QA of the stitched clip failed "
                            f"({'; '.join(report['summary'].get('decision_reasons', [])) or 'failing frames'}); "
                            f"not signed or delivered. Report: {report_path}")
    summary = {k: v for k, v in report.get("summary", {}).items() if not isinstance(v, (list, dict))}
    models = list(models or []) + [{"role": "qa_analyzer", "name": getattr(analyzer, "name", "builtin")}]
    res = None
    if creds is not None:
        anchors = Path(signing["trust_anchors"]).read_text() if signing.get("trust_anchors") else None
        source = (str(job.faces[0]), f"source face ({job.faces[0].name})")
        res = sign_and_verify(stitched, output, trust_anchors_pem=anchors, creds=creds,
                              target_ingredient=(str(job.clip), job.clip.name), source_ingredient=source,
                              qa_summary={"decision": decision, **summary, "scope": "farm: whole stitched clip"},
                              models=models, attestation=signing.get("attestation") or None,
                              software_agent=f"Swapline farm (core {core_version})")
    else:
        tmp = output.with_name(f".{output.name}.partial{output.suffix}")
        shutil.copyfile(stitched, tmp)
        os.replace(tmp, output)
    out_sha = res.output_sha256 if res is not None else sha256_file(output)
    log = audit_log.append_job(
        out_dir, job_id=job.job_id, input_sha256=res.input_sha256 if res else sha256_file(stitched),
        output_sha256=out_sha, models=models,
        settings={"workflow": job.workflow.name, **job.settings}, qa_decision=decision,
        signer_fingerprint=creds.fingerprint_sha256 if creds else None, output=output.name,
        target_sha256=sha256_file(job.clip), signer_kind=res.signer_kind if res else None,
        signed=bool(res and res.signed), signing_error=(res.error if res else "no signing configured"),
        validation_state=res.validation_state if res else None, farm=True, priority=job.priority)
    return {"output": str(output), "qa": report, "qa_decision": decision, "qa_report": str(report_path),
            "signed": bool(res and res.signed), "signer_kind": res.signer_kind if res else None,
            "validation_state": res.validation_state if res else None,
            "signing_error": res.error if res else "no signing configured", "output_sha256": out_sha,
            "audit_log": str(log), "already_final": False}
