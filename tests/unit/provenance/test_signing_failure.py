"""Fail-closed signing: every way signing can fail leaves a file named *_UNSIGNED and a reason,
and under ``fail`` (or a required trusted signer) the job fails. Real certificates (made with
``cryptography``) and the real c2pa signer; nothing is mocked."""
from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import c2pa  # noqa: F401  (a hard requirement: missing, this file fails instead of skipping)
import numpy as np
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from swapline_core.provenance import c2pa as prov
from swapline_core.provenance import sign_policy
from swapline_core.provenance import signing as sc


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _usage(sign_data, sign_certs):
    return x509.KeyUsage(digital_signature=sign_data, content_commitment=False, key_encipherment=False,
                         data_encipherment=False, key_agreement=False, key_cert_sign=sign_certs,
                         crl_sign=sign_certs, encipher_only=False, decipher_only=False)


def make_signer(folder: Path, *, leaf_days=(-1, 30), wrong_key=False, anchors=True) -> Path:
    """A user dir with signing.json: CA + ES256 leaf valid for ``leaf_days`` (from, to) around now;
    ``wrong_key`` stores a key that is not the certificate's."""
    folder.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("test root")).issuer_name(_name("test root"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - dt.timedelta(days=400)).not_valid_after(now + dt.timedelta(days=400))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(_usage(False, True), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (x509.CertificateBuilder().subject_name(_name("test signer")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now + dt.timedelta(days=leaf_days[0]))
            .not_valid_after(now + dt.timedelta(days=leaf_days[1]))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_usage(True, False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.EMAIL_PROTECTION]), False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False)
            .sign(ca_key, hashes.SHA256()))
    stored = ec.generate_private_key(ec.SECP256R1()) if wrong_key else key
    pem = serialization.Encoding.PEM
    cfg = sc.config_path(folder)
    cfg.parent.mkdir(parents=True, exist_ok=True)
    (cfg.parent / "chain.pem").write_bytes(leaf.public_bytes(pem) + ca.public_bytes(pem))
    (cfg.parent / "root.pem").write_bytes(ca.public_bytes(pem))
    key_path = cfg.parent / "signer.key"
    key_path.write_bytes(stored.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()))
    os.chmod(key_path, 0o600)
    cfg.write_text(json.dumps({"cert_chain": "chain.pem", "private_key": "signer.key", "algorithm": "es256",
                               **({"trust_anchors": "root.pem"} if anchors else {})}))
    return folder


def make_png(path: Path) -> Path:
    from PIL import Image
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(path)
    return path


def sign(user: Path, out: Path, *, require_trusted=False) -> prov.SignResult:
    target = make_png(out.parent / "target.png")
    return sign_policy.sign_output(
        out, load_credentials=lambda: sc.load_signing_credentials(user, require_trusted=require_trusted),
        require_trusted=require_trusted, target_ingredient=(target, "target"), source_ingredient=None,
        qa_summary={}, models=[], attestation=None)


def _broken_json(user: Path) -> None:
    sc.config_path(user).write_text('{"cert_chain": "chain.pem", ')


@pytest.mark.parametrize("case, reason", [
    ("broken config", "is not valid JSON"),
    ("expired certificate", "is not valid now"),
    ("key does not match", "does not belong to"),
])
def test_each_failure_keeps_a_visibly_unsigned_file_and_fails_the_job(tmp_path, case, reason):
    user = make_signer(tmp_path / "user", leaf_days=(-60, -1) if case == "expired certificate" else (-1, 30),
                       wrong_key=case == "key does not match")
    if case == "broken config":
        _broken_json(user)
    (tmp_path / "out").mkdir()
    out = make_png(tmp_path / "out" / "swapped.png")
    before = out.read_bytes()
    res = sign(user, out)
    assert not res.signed and reason in res.error, res.error
    unsigned = tmp_path / "out" / "swapped_UNSIGNED.png"
    assert res.output_path == str(unsigned) and not out.exists(), "the unsigned file kept its normal name"
    assert unsigned.read_bytes() == before and "swapped_UNSIGNED.png" in res.error
    assert prov.verify_media(unsigned).state == "NoManifest"

    with pytest.raises(sign_policy.SigningFailedError, match=reason):         # shipped default
        sign_policy.raise_if_failed([res], "fail", require_trusted=False)
    with pytest.raises(sign_policy.SigningFailedError, match="trusted signer is required"):
        sign_policy.raise_if_failed([res], "keep unsigned", require_trusted=True)
    sign_policy.raise_if_failed([res], "keep unsigned", require_trusted=False)   # the user's explicit choice


def test_a_good_signer_signs_in_place_and_nothing_fails(tmp_path):
    user = make_signer(tmp_path / "user")
    (tmp_path / "out").mkdir()
    out = make_png(tmp_path / "out" / "swapped.png")
    res = sign(user, out, require_trusted=True)
    assert res.signed and res.validation_state == "Trusted", res.error
    assert res.output_path == str(out) and not list((tmp_path / "out").glob("*UNSIGNED*"))
    sign_policy.raise_if_failed([res], "fail", require_trusted=True)


def test_required_trusted_signer_without_trust_anchors_is_unverifiable(tmp_path):
    """A signature nobody can verify against an anchor does not satisfy require_trusted_signer."""
    user = make_signer(tmp_path / "user", anchors=False)
    (tmp_path / "out").mkdir()
    out = make_png(tmp_path / "out" / "swapped.png")
    res = sign(user, out, require_trusted=True)
    assert not res.signed and "trust_anchors" in res.error, res.error
    assert (tmp_path / "out" / "swapped_UNSIGNED.png").exists()
    # without the requirement the same signer is acceptable (Valid, only untrusted)
    out2 = make_png(tmp_path / "out" / "other.png")
    assert sign(user, out2).signed


def test_required_trusted_signer_refuses_the_development_signer(tmp_path):
    (tmp_path / "out").mkdir()
    out = make_png(tmp_path / "out" / "swapped.png")
    res = sign(tmp_path / "no-config", out, require_trusted=True)
    assert not res.signed and "trusted signer is required" in res.error
    assert res.output_path.endswith("swapped_UNSIGNED.png")


def test_unknown_failure_mode_is_refused():
    with pytest.raises(prov.ProvenanceError, match="on_signing_failure"):
        sign_policy.fails_closed("ignore", False)
