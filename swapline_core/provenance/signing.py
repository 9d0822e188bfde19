"""Signing credentials for Content Credentials (C2PA): a configured signer, or a local dev one.

The node passes ComfyUI's user directory. ``<user_dir>/swapline/signing.json`` names a PEM
certificate chain (leaf first), a PEM private key and the algorithm; relative paths resolve
against the config's folder. Without that file a development CA and signer are generated once
under ``<user_dir>/swapline/dev-signer/`` and reused; such files are labelled "development"
everywhere because nobody else trusts that CA.

The checks below mirror what c2pa-python 0.38 enforces (found by trial, see
shared/platform-notes.md), so a bad certificate fails here with the file and field named
instead of as an opaque "the certificate is invalid" at signing time.

The private key is never held in these objects: only its path. It is read at signing time and
never printed, logged or put in a repr.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SwaplineError

ALGORITHMS = ("es256", "es384", "ps256", "ed25519")
CONFIG_FIELDS = ("cert_chain", "private_key", "algorithm", "tsa_url", "trust_anchors")
EMAIL_PROTECTION_OID = "1.3.6.1.5.5.7.3.4"
# A dev signer this close to expiry is replaced rather than reused, so a long job never ends
# with a certificate that lapsed mid-run.
_DEV_RENEW_MARGIN = _dt.timedelta(days=7)
_DEV_LEAF_DAYS = 730
_DEV_CA_DAYS = 3650


class SigningConfigError(SwaplineError):
    """Problem with signing credentials; names the file and, where known, the field."""

    def __init__(self, path: str | os.PathLike, field_name: str | None, problem: str):
        self.path = str(path)
        self.field = field_name
        where = f"Signing config '{self.path}'" + (f", field '{field_name}'" if field_name else "")
        super().__init__(f"{where}: {problem}")


def config_path(user_dir: str | os.PathLike) -> Path:
    return Path(user_dir) / "swapline" / "signing.json"


def dev_signer_dir(user_dir: str | os.PathLike) -> Path:
    return Path(user_dir) / "swapline" / "dev-signer"


@dataclass(frozen=True, repr=False)
class SigningCredentials:
    kind: str                          # "configured" | "development"
    algorithm: str                     # one of ALGORITHMS
    cert_chain_pem: bytes              # leaf first; public material only
    private_key_path: Path
    fingerprint_sha256: str            # SHA-256 of the leaf certificate (DER), lowercase hex
    subject: str
    not_after: _dt.datetime
    source: Path                       # the config file, or the dev-signer folder
    trust_anchors_pem: str | None = None
    tsa_url: str | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def is_development(self) -> bool:
        return self.kind == "development"

    def read_private_key_pem(self) -> bytes:
        """PKCS#8 PEM of the key, for handing straight to the signer. Never log the result."""
        # Re-serialising as PKCS#8 lets users keep SEC1 ("EC PRIVATE KEY") or PKCS#1 files,
        # which c2pa's key parser does not take.
        from cryptography.hazmat.primitives import serialization
        key = _load_key(self.private_key_path, self.source, "private_key")
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())

    def describe(self) -> dict:
        """What is safe to show or log about the signer."""
        return {"kind": self.kind, "algorithm": self.algorithm, "subject": self.subject,
                "fingerprint_sha256": self.fingerprint_sha256,
                "not_after": self.not_after.isoformat(), "source": str(self.source),
                "warnings": list(self.warnings)}

    def __repr__(self) -> str:
        return (f"SigningCredentials(kind={self.kind!r}, algorithm={self.algorithm!r}, "
                f"subject={self.subject!r}, fingerprint_sha256={self.fingerprint_sha256!r})")


def load_signing_credentials(user_dir: str | os.PathLike, *,
                             require_trusted: bool = False) -> SigningCredentials:
    """The configured signer if ``signing.json`` exists, else the development signer."""
    path = config_path(user_dir)
    if path.exists():
        return load_config(path)
    return dev_credentials(user_dir, require_trusted=require_trusted)


def load_config(path: str | os.PathLike) -> SigningCredentials:
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SigningConfigError(path, None, f"cannot be read ({e.strerror or e})") from None
    try:
        cfg = json.loads(raw)
    except json.JSONDecodeError as e:
        raise SigningConfigError(path, None, f"is not valid JSON (line {e.lineno}, column "
                                             f"{e.colno}: {e.msg})") from None
    if not isinstance(cfg, dict):
        raise SigningConfigError(path, None, "must be a JSON object with fields "
                                             + ", ".join(CONFIG_FIELDS))
    unknown = sorted(set(cfg) - set(CONFIG_FIELDS))
    if unknown:
        # Usually a typo; silently ignoring "privat_key" would hide the real error.
        raise SigningConfigError(path, unknown[0], "unknown field; allowed fields are "
                                                   + ", ".join(CONFIG_FIELDS))
    for name in ("cert_chain", "private_key", "algorithm"):
        if not isinstance(cfg.get(name), str) or not cfg[name].strip():
            raise SigningConfigError(path, name, "is required and must be a non-empty string")
    algorithm = cfg["algorithm"].strip().lower()
    if algorithm not in ALGORITHMS:
        raise SigningConfigError(path, "algorithm", f"'{cfg['algorithm']}' is not supported; "
                                                    f"use one of {', '.join(ALGORITHMS)}")
    if cfg.get("tsa_url") not in (None, ""):
        # A time-stamp authority is a network call; Swapline signs offline.
        raise SigningConfigError(path, "tsa_url", "must be null or absent: signing runs "
                                                  "offline and cannot reach a time-stamp server")
    base = path.parent
    chain_path = _resolve(base, cfg["cert_chain"])
    key_path = _resolve(base, cfg["private_key"])
    certs = _load_chain(chain_path, path, "cert_chain")
    key = _load_key(key_path, path, "private_key")
    _check_pair(certs, key, algorithm, path)

    anchors = None
    if cfg.get("trust_anchors") not in (None, ""):
        if not isinstance(cfg["trust_anchors"], str):
            raise SigningConfigError(path, "trust_anchors", "must be a path string or null")
        anchors_path = _resolve(base, cfg["trust_anchors"])
        _load_chain(anchors_path, path, "trust_anchors")
        anchors = anchors_path.read_text(encoding="ascii")

    warnings = []
    if os.name == "posix" and key_path.stat().st_mode & 0o077:
        warnings.append(f"private key '{key_path}' is readable by other users; chmod 600 it")
    return _credentials("configured", algorithm, certs, key_path, path, anchors, warnings)


def dev_credentials(user_dir: str | os.PathLike, *,
                    require_trusted: bool = False) -> SigningCredentials:
    """The local development signer, generated on first use and reused afterwards."""
    if require_trusted:
        raise SigningConfigError(
            config_path(user_dir), None,
            "not found, and a trusted signer is required. Create it with cert_chain, "
            "private_key and algorithm (see docs/provenance.md#signing-credentials); the development "
            "signer is refused because no one else trusts its CA")
    folder = dev_signer_dir(user_dir)
    existing = _load_dev(folder)
    if existing is not None:
        return existing
    folder.parent.mkdir(parents=True, exist_ok=True)
    if folder.exists():
        # Expired or damaged: keep it aside (it signed earlier outputs) and start afresh.
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        try:
            os.replace(folder, folder.with_name(f"{folder.name}.old-{stamp}"))
        except FileNotFoundError:
            pass                          # another process moved it first
    # Generate into a private temp folder and rename it into place in one step, so two
    # processes starting together never mix one's certificate with the other's key.
    tmp = Path(tempfile.mkdtemp(prefix=".dev-signer-", dir=folder.parent))
    try:
        _write_dev_signer(tmp)
        try:
            os.rename(tmp, folder)
        except OSError:
            if not folder.exists():
                raise
            # Lost the race: the other process's signer is as good as ours.
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    loaded = _load_dev(folder)
    if loaded is None:
        raise SigningConfigError(folder, None, "development signer could not be created")
    return loaded


# ---- internals -------------------------------------------------------------------------------

def _resolve(base: Path, value: str) -> Path:
    p = Path(os.path.expanduser(value.strip()))
    return p if p.is_absolute() else (base / p)


def _load_chain(path: Path, cfg: Path, field_name: str) -> list:
    from cryptography import x509
    try:
        data = path.read_bytes()
    except OSError as e:
        raise SigningConfigError(cfg, field_name, f"cannot read '{path}' "
                                                  f"({e.strerror or e})") from None
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        certs = []
    if not certs:
        raise SigningConfigError(cfg, field_name, f"'{path}' holds no PEM certificate "
                                                  "(expected -----BEGIN CERTIFICATE----- blocks)")
    return certs


def _load_key(path: Path, cfg: Path, field_name: str):
    from cryptography.hazmat.primitives import serialization
    try:
        data = path.read_bytes()
    except OSError as e:
        raise SigningConfigError(cfg, field_name, f"cannot read '{path}' "
                                                  f"({e.strerror or e})") from None
    # The parser's own messages are dropped on purpose: nothing about key bytes goes upward.
    try:
        return serialization.load_pem_private_key(data, password=None)
    except TypeError:
        problem = "is encrypted; store it unencrypted (PKCS#8 PEM) with permissions 600"
    except Exception:
        problem = "is not a readable PEM private key"
    raise SigningConfigError(cfg, field_name, f"'{path}' {problem}")


def _key_matches_algorithm(key, algorithm: str) -> bool:
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
    if algorithm in ("es256", "es384"):
        curve = "secp256r1" if algorithm == "es256" else "secp384r1"
        return isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == curve
    if algorithm == "ps256":
        return isinstance(key, rsa.RSAPrivateKey) and key.key_size >= 2048
    return isinstance(key, ed25519.Ed25519PrivateKey)


def _spki(public_key) -> bytes:
    from cryptography.hazmat.primitives import serialization
    return public_key.public_bytes(serialization.Encoding.DER,
                                   serialization.PublicFormat.SubjectPublicKeyInfo)


def _check_pair(certs: list, key, algorithm: str, cfg: Path) -> None:
    """The certificate profile c2pa-python 0.38 accepts; each failure names what to fix."""
    from cryptography import x509
    leaf = certs[0]
    label = f"the signing (first) certificate '{leaf.subject.rfc4514_string()}'"
    if leaf.issuer == leaf.subject:
        raise SigningConfigError(cfg, "cert_chain", f"{label} is self-signed; c2pa needs a "
                                 "certificate issued by a CA, leaf first, then its issuers")
    for child, parent in zip(certs, certs[1:], strict=False):
        if child.issuer != parent.subject:
            raise SigningConfigError(cfg, "cert_chain", "certificates are out of order: each "
                                     "must be followed by its issuer (leaf first)")
    ext = leaf.extensions

    def get(cls):
        try:
            return ext.get_extension_for_class(cls).value
        except x509.ExtensionNotFound:
            return None

    bc = get(x509.BasicConstraints)
    if bc is not None and bc.ca:
        raise SigningConfigError(cfg, "cert_chain", f"{label} is a CA certificate; put the "
                                 "end-entity signing certificate first")
    ku = get(x509.KeyUsage)
    if ku is None or not ku.digital_signature:
        raise SigningConfigError(cfg, "cert_chain", f"{label} lacks keyUsage digitalSignature")
    eku = get(x509.ExtendedKeyUsage)
    if eku is None or EMAIL_PROTECTION_OID not in {o.dotted_string for o in eku}:
        raise SigningConfigError(cfg, "cert_chain", f"{label} lacks extendedKeyUsage "
                                 f"emailProtection ({EMAIL_PROTECTION_OID}), which c2pa requires "
                                 "by default")
    if get(x509.AuthorityKeyIdentifier) is None:
        raise SigningConfigError(cfg, "cert_chain", f"{label} lacks the AuthorityKeyIdentifier "
                                 "extension")
    now = _dt.datetime.now(_dt.timezone.utc)
    if not (leaf.not_valid_before_utc <= now <= leaf.not_valid_after_utc):
        raise SigningConfigError(cfg, "cert_chain", f"{label} is not valid now (valid "
                                 f"{leaf.not_valid_before_utc:%Y-%m-%d} to "
                                 f"{leaf.not_valid_after_utc:%Y-%m-%d})")
    if not _key_matches_algorithm(key, algorithm):
        raise SigningConfigError(cfg, "algorithm", f"'{algorithm}' does not fit the private "
                                 "key's type (es256: P-256, es384: P-384, ps256: RSA >= 2048, "
                                 "ed25519: Ed25519)")
    if _spki(key.public_key()) != _spki(leaf.public_key()):
        raise SigningConfigError(cfg, "private_key", f"does not belong to {label}")


def _credentials(kind, algorithm, certs, key_path, source, anchors, warnings):
    from cryptography.hazmat.primitives import serialization
    leaf = certs[0]
    chain_pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)
    fp = hashlib.sha256(leaf.public_bytes(serialization.Encoding.DER)).hexdigest()
    return SigningCredentials(kind=kind, algorithm=algorithm, cert_chain_pem=chain_pem,
                              private_key_path=key_path, fingerprint_sha256=fp,
                              subject=leaf.subject.rfc4514_string(),
                              not_after=leaf.not_valid_after_utc, source=source,
                              trust_anchors_pem=anchors, tsa_url=None,
                              warnings=tuple(warnings))


_DEV_CHAIN, _DEV_KEY, _DEV_CA = "signer-chain.pem", "signer-key.pem", "dev-ca.pem"


def _load_dev(folder: Path) -> SigningCredentials | None:
    """The stored dev signer, or None when absent, damaged or about to expire."""
    if not (folder / _DEV_CHAIN).is_file() or not (folder / _DEV_KEY).is_file():
        return None
    try:
        certs = _load_chain(folder / _DEV_CHAIN, folder, _DEV_CHAIN)
        key = _load_key(folder / _DEV_KEY, folder, _DEV_KEY)
        _check_pair(certs, key, "es256", folder)
        anchors = (folder / _DEV_CA).read_text(encoding="ascii")
    except (SigningConfigError, OSError):
        return None
    if certs[0].not_valid_after_utc - _dt.datetime.now(_dt.timezone.utc) < _DEV_RENEW_MARGIN:
        return None
    return _credentials("development", "es256", certs, folder / _DEV_KEY, folder, anchors, [])


def _write_private(path: Path, data: bytes) -> None:
    # Created 0600 from the first byte; a chmod afterwards would leave a readable window.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(path, 0o600)


def _write_dev_signer(folder: Path) -> None:
    """A throwaway CA and an ES256 signer it issued, in the profile c2pa accepts.

    The CA's private key is discarded after issuing the one certificate: nothing needs it
    again (an expired signer is replaced wholesale), and a stored CA key could mint more.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn),
                          x509.NameAttribute(NameOID.ORGANIZATION_NAME,
                                             "Swapline development (untrusted)")])

    def usage(sign_data, sign_certs):
        return x509.KeyUsage(digital_signature=sign_data, content_commitment=False,
                             key_encipherment=False, data_encipherment=False,
                             key_agreement=False, key_cert_sign=sign_certs,
                             crl_sign=sign_certs, encipher_only=False, decipher_only=False)

    now = _dt.datetime.now(_dt.timezone.utc)
    start = now - _dt.timedelta(hours=1)     # tolerate small clock skew between machines
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder()
          .subject_name(name("Swapline Development CA"))
          .issuer_name(name("Swapline Development CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(now + _dt.timedelta(days=_DEV_CA_DAYS))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(usage(False, True), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (x509.CertificateBuilder()
            .subject_name(name("Swapline Development Signer")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(now + _dt.timedelta(days=_DEV_LEAF_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(usage(True, False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.EMAIL_PROTECTION]), False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                           False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    (folder / _DEV_CA).write_bytes(ca.public_bytes(pem))
    (folder / _DEV_CHAIN).write_bytes(leaf.public_bytes(pem) + ca.public_bytes(pem))
    _write_private(folder / _DEV_KEY, key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
