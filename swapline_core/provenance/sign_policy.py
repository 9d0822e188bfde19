"""What happens when an output cannot be signed: fail closed, or keep it visibly unsigned.

``sign_output`` turns every way signing can fail (no usable credentials, an expired or
mismatched certificate, c2pa refusing, a read-back that does not verify) into one result. An
output that ends up unsigned is always renamed ``<name>_UNSIGNED.<ext>``, so a file that lacks
Content Credentials can never be mistaken for one that has them; the caller then records the job
in the audit log and, under ``fail`` (or with a trusted signer required), fails the job with the
reason via ``raise_if_failed``.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from .c2pa import ProvenanceError, SignResult, sign_and_verify
from .hashing import sha256_file
from .signing import SigningConfigError, SigningCredentials

ON_FAILURE = ("fail", "keep unsigned")
UNSIGNED_SUFFIX = "_UNSIGNED"


class SigningFailedError(ProvenanceError):
    """The job fails because its output could not be signed (the unsigned file is kept aside)."""


def unsigned_path(path: str | os.PathLike) -> Path:
    p = Path(path)
    return p.with_name(f"{p.stem}{UNSIGNED_SUFFIX}{p.suffix}")


def fails_closed(on_failure: str, require_trusted: bool) -> bool:
    if on_failure not in ON_FAILURE:
        raise ProvenanceError(f"on_signing_failure must be one of {ON_FAILURE}, got {on_failure!r}")
    return on_failure == "fail" or require_trusted


def sign_output(path: str | os.PathLike, *, load_credentials: Callable[[], SigningCredentials],
                require_trusted: bool = False, **sign_kwargs) -> SignResult:
    """Sign ``path`` in place; on any failure it is renamed ``*_UNSIGNED`` and the result says why."""
    try:
        creds = load_credentials()
    except (SigningConfigError, ProvenanceError, OSError) as e:
        res = SignResult(ok=False, output_path=str(path), signed=False, signer_kind="none",
                         signer_fingerprint=None, error=f"no usable signing credentials ({e})")
        res.input_sha256 = sha256_file(path)
    else:
        res = sign_and_verify(path, creds=creds, require_trusted=require_trusted, **sign_kwargs)
    if not res.signed:
        target = unsigned_path(path)
        os.replace(path, target)
        res.output_path = str(target)
        res.output_sha256 = sha256_file(target)
        res.error = (res.error or "not signed").replace(f"'{Path(path).name}' is kept unsigned",
                                                        f"kept unsigned as '{target.name}'")
        if "kept unsigned as" not in res.error:
            res.error += f"; kept unsigned as '{target.name}'"
    return res


def raise_if_failed(results: list[SignResult], on_failure: str, require_trusted: bool) -> None:
    failed = [r for r in results if not r.signed]
    if failed and fails_closed(on_failure, require_trusted):
        why = "a trusted signer is required" if require_trusted else "on_signing_failure is 'fail'"
        raise SigningFailedError(f"signing failed and {why}: " + "; ".join(r.error or "" for r in failed))
