"""Delivery of a finished job: a signed webhook callback and an atomic copy of its outputs.

Webhook: ``POST`` of the JSON payload with ``X-Swapline-Signature: sha256=<hex>``, the HMAC-SHA256
of the exact body bytes under the shared secret, so the receiver can check the call came from the
farm (recompute the HMAC over the raw body, compare with ``hmac.compare_digest``). Every attempt
of one delivery carries the same ``X-Swapline-Delivery`` id, so a receiver that got a call whose
answer was lost can drop the repeat. Failures that may pass (connection refused or reset,
timeouts, HTTP 408, 429 and 5xx) are retried with exponential backoff and jitter; other HTTP 4xx
answers (wrong URL, rejected signature) cannot get better by waiting and stop at once. The result
lists every attempt's error. The secret never appears in a log line, an error or the result.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import random
import shutil
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

log = logging.getLogger("swapline_farm.delivery")

SIGNATURE_HEADER = "X-Swapline-Signature"
DELIVERY_HEADER = "X-Swapline-Delivery"
RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


def encode_body(payload: dict) -> bytes:
    """The exact bytes that are sent and signed (compact, keys sorted: the same payload always
    gives the same body and signature)."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str).encode()


def sign(body: bytes, secret: bytes | str) -> str:
    """Header value for ``body``: ``sha256=<hex HMAC-SHA256>``."""
    key = secret.encode() if isinstance(secret, str) else bytes(secret)
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


def verify(body: bytes, header: str | None, secret: bytes | str) -> bool:
    """What a receiver does: constant-time comparison of the header with the expected signature."""
    return header is not None and hmac.compare_digest(header, sign(body, secret))


def resolve_secret(config: dict) -> bytes | None:
    """The webhook secret from a farm config: ``webhook_secret_env`` (name of an environment
    variable, preferred), ``webhook_secret_file`` (a file holding it) or ``webhook_secret``
    (inline; fine for tests, avoid in manifests that get shared). None when none is set."""
    if config.get("webhook_secret_env"):
        name = config["webhook_secret_env"]
        if not os.environ.get(name):
            raise ValueError(f"webhook_secret_env names {name!r} but that environment variable is empty or unset: "
                             "export it where the coordinator runs")
        return os.environ[name].encode()
    if config.get("webhook_secret_file"):
        path = Path(config["webhook_secret_file"]).expanduser()
        if not path.is_file():
            raise ValueError(f"webhook_secret_file {path} does not exist: create it (one line, the shared secret)")
        secret = path.read_bytes().strip()
        if not secret:
            raise ValueError(f"webhook_secret_file {path} is empty")
        return secret
    inline = config.get("webhook_secret")
    return inline.encode() if isinstance(inline, str) else inline


def redact_url(url: str) -> str:
    """The URL for logs and results: no user:password, no query string (webhook URLs often carry
    a token there)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "<redacted>" if parts.query else "", ""))


def backoff_delay(attempt: int, base_delay: float, max_delay: float, rng: random.Random) -> float:
    """Exponential backoff with "equal jitter": half of ``base * 2**attempt`` (capped) fixed, the
    other half random, so retries of many jobs failing at once spread out but still back off."""
    d = min(max_delay, base_delay * (2 ** attempt))
    return d / 2 + rng.uniform(0, d / 2)


def _post(url: str, body: bytes, headers: dict, timeout: float) -> tuple[int, str]:
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read(2048).decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, (e.read(2048) or b"").decode(errors="replace")


def deliver_webhook(url: str, payload: dict, secret: bytes | str | None, attempts: int = 5,
                    base_delay: float = 0.5, *, max_delay: float = 60.0, timeout: float = 10.0,
                    rng: random.Random | None = None, sleep=time.sleep) -> dict:
    """POST ``payload`` to ``url`` until a 2xx answer or ``attempts`` tries.

    Returns ``{"ok", "url" (redacted), "delivery_id", "status" (last HTTP status or None),
    "attempts": [{"attempt", "status", "error", "seconds", "retry_in"}...], "gave_up": reason|None}``.
    Never raises for a failed delivery (the job's output exists either way; the caller records the
    result); raises ValueError for arguments that can never work.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"webhook URL {redact_url(url)!r} is not an http(s) URL: set the job's webhook to "
                         "e.g. https://host/path")
    if attempts < 1:
        raise ValueError(f"attempts is {attempts}; it must be at least 1")
    rng = rng or random.Random()
    body = encode_body(payload)
    delivery = uuid.uuid4().hex
    headers = {"Content-Type": "application/json", "User-Agent": "swapline-farm", DELIVERY_HEADER: delivery}
    if secret:
        headers[SIGNATURE_HEADER] = sign(body, secret)
    where = redact_url(url)
    result = {"ok": False, "url": where, "delivery_id": delivery, "status": None, "attempts": [], "gave_up": None}
    for k in range(attempts):
        t0 = time.monotonic()
        status, error = None, None
        try:
            status, text = _post(url, body, headers, timeout)
            if not 200 <= status < 300:
                error = f"HTTP {status}: {text.strip()[:200]}"
        except (urllib.error.URLError, OSError) as e:      # refused, reset, DNS, timeout
            reason = getattr(e, "reason", e)
            error = f"{type(reason).__name__}: {reason}"
        entry = {"attempt": k + 1, "status": status, "error": error, "seconds": round(time.monotonic() - t0, 4),
                 "retry_in": None}
        result["attempts"].append(entry)
        result["status"] = status
        if error is None:
            result["ok"] = True
            log.info("webhook %s delivered (attempt %d/%d, delivery %s)", where, k + 1, attempts, delivery)
            return result
        if status is not None and status not in RETRY_STATUS:
            result["gave_up"] = f"HTTP {status} is not retryable (fix the URL or the receiver's secret)"
            log.error("webhook %s refused: %s; not retried", where, error)
            return result
        if k + 1 < attempts:
            entry["retry_in"] = round(backoff_delay(k, base_delay, max_delay, rng), 4)
            log.warning("webhook %s attempt %d/%d failed: %s; retrying in %.2f s", where, k + 1, attempts, error,
                        entry["retry_in"])
            sleep(entry["retry_in"])
    result["gave_up"] = f"{attempts} attempts failed"
    log.error("webhook %s gave up after %d attempts; last error: %s", where, attempts, result["attempts"][-1]["error"])
    return result


def copy_outputs(files: list[Path], destination: Path) -> list[Path]:
    """Copy ``files`` into the folder ``destination`` atomically: each is written to a temporary
    name in the destination, synced and renamed, so a watcher there never sees half a file. An
    existing file of the same name is replaced (delivery of a re-run job). Returns the new paths."""
    sources = [Path(f) for f in files]
    missing = [str(f) for f in sources if not f.is_file()]
    if missing:
        raise FileNotFoundError(f"cannot deliver {', '.join(missing)}: not a file (was the job's output removed?)")
    names = [f.name for f in sources]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"two outputs share the name(s) {dupes}; they would overwrite each other in {destination}")
    dest = Path(destination).expanduser()
    if dest.exists() and not dest.is_dir():
        raise NotADirectoryError(f"destination {dest} is a file; set the job's destination to a folder")
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for src in sources:
        target = dest / src.name
        fd, tmp = tempfile.mkstemp(dir=dest, prefix=f".{src.name}.", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as f, open(src, "rb") as s:
                shutil.copyfileobj(s, f, 1 << 20)
                f.flush()
                os.fsync(f.fileno())
            if os.path.getsize(tmp) != src.stat().st_size:
                raise OSError(f"copy of {src} to {dest} is incomplete (disk full?)")
            shutil.copymode(src, tmp)
            os.replace(tmp, target)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        out.append(target)
    return out
