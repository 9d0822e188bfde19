"""Content Credentials: configured and dev signers; sign, read back, tamper, lose nothing."""
from __future__ import annotations

import base64
import datetime as dt
import json
import os
import struct
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

# c2pa-python is a hard requirement (requirements.txt): a missing package must fail this file,
# never skip it, or CI would pass without checking a single signature.
import c2pa  # noqa: E402,F401
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa  # noqa: E402
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # noqa: E402

from swapline_core.provenance import c2pa as prov  # noqa: E402
from swapline_core.provenance import signing as sc  # noqa: E402
from swapline_core.provenance.hashing import sha256_file  # noqa: E402

UNTRUSTED = "signingCredential.untrusted"


# ---- fixtures: a test PKI and small media --------------------------------------------------

def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Swapline tests")])


def _usage(sign_data, sign_certs):
    return x509.KeyUsage(digital_signature=sign_data, content_commitment=False,
                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                         key_cert_sign=sign_certs, crl_sign=sign_certs, encipher_only=False,
                         decipher_only=False)


def _new_key(algorithm):
    if algorithm == "es256":
        return ec.generate_private_key(ec.SECP256R1())
    if algorithm == "es384":
        return ec.generate_private_key(ec.SECP384R1())
    if algorithm == "ps256":
        return rsa.generate_private_key(65537, 2048)
    return ed25519.Ed25519PrivateKey.generate()


def make_pki(folder: Path, algorithm="es256", *, self_signed_leaf=False, tag="test"):
    """Root CA + leaf in c2pa's accepted profile; returns (chain, key, root) paths."""
    folder.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    start, root_name = now - dt.timedelta(days=1), _name(f"{tag} root")
    ca = (x509.CertificateBuilder().subject_name(root_name).issuer_name(root_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(now + dt.timedelta(days=60))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(_usage(False, True), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
          .sign(ca_key, hashes.SHA256()))
    key = _new_key(algorithm)
    leaf_name = _name(f"{tag} signer")
    issuer_key, issuer_name = (key, leaf_name) if self_signed_leaf else (ca_key, ca.subject)
    builder = (x509.CertificateBuilder().subject_name(leaf_name).issuer_name(issuer_name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(now + dt.timedelta(days=30))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(_usage(True, False), critical=True)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.EMAIL_PROTECTION]), False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                   issuer_key.public_key()), False))
    # Ed25519 signs without a separate digest; only a self-signed Ed25519 leaf hits that case.
    ed_issuer = isinstance(issuer_key, ed25519.Ed25519PrivateKey)
    leaf = builder.sign(issuer_key, None if ed_issuer else hashes.SHA256())
    pem = serialization.Encoding.PEM
    chain, key_path, root = folder / "chain.pem", folder / "signer.key", folder / "root.pem"
    chain.write_bytes(leaf.public_bytes(pem) + ca.public_bytes(pem))
    root.write_bytes(ca.public_bytes(pem))
    key_path.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    os.chmod(key_path, 0o600)
    return chain, key_path, root


def write_config(user_dir: Path, **fields) -> Path:
    path = sc.config_path(user_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(fields))
    return path


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture()
def configured(tmp_path, pki):
    """A user dir whose signing.json uses paths relative to the config folder."""
    chain, key, root = pki
    user = tmp_path / "user"
    cfg_dir = sc.config_path(user).parent
    cfg_dir.mkdir(parents=True)
    for p in (chain, key, root):
        (cfg_dir / p.name).write_bytes(p.read_bytes())
    os.chmod(cfg_dir / key.name, 0o600)
    write_config(user, cert_chain="chain.pem", private_key="signer.key", algorithm="es256",
                 trust_anchors="root.pem", tsa_url=None)
    return user


def make_mp4(path: Path, seed=0) -> Path:
    import av
    rng = np.random.default_rng(seed)
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=10)
        stream.width = stream.height = 64
        stream.pix_fmt = "yuv420p"
        for _ in range(10):
            frame = av.VideoFrame.from_ndarray(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8),
                                               format="rgb24")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def make_png(path: Path, seed=0) -> Path:
    from PIL import Image
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 255, (48, 48, 3), dtype=np.uint8)).save(path)
    return path


def sign_kwargs(creds, target, source):
    return dict(creds=creds, target_ingredient=(target, "target clip"),
                source_ingredient=(source, "source face"),
                qa_summary={"decision": "pass", "frames": 10, "min_identity": np.float32(0.61)},
                models=[{"name": "inswapper_128.onnx", "sha256": "ab" * 32}],
                attestation="Consent obtained from the person shown",
                software_agent="Swapline 0.1.0-test")


def flip_in_box(path: Path, kind: bytes) -> None:
    """Flip one byte in the middle of the first MP4 top-level box / PNG chunk of type ``kind``."""
    data = bytearray(path.read_bytes())
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        pos = 8
        while pos < len(data):
            length, ctype = struct.unpack(">I4s", data[pos:pos + 8])
            if ctype == kind:
                data[pos + 8 + length // 2] ^= 0x55
                break
            pos += 12 + length
        else:
            raise AssertionError(f"no {kind} chunk")
    else:
        pos = 0
        while pos < len(data):
            size, btype = struct.unpack(">I4s", data[pos:pos + 8])
            header = 8
            if size == 1:
                size, header = struct.unpack(">Q", data[pos + 8:pos + 16])[0], 16
            elif size == 0:
                size = len(data) - pos
            if btype == kind:
                data[pos + header + (size - header) // 2] ^= 0x55
                break
            pos += size
        else:
            raise AssertionError(f"no {kind} box")
    path.write_bytes(data)


# ---- signing and reading back --------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["mp4", "png"])
def test_sign_read_back_and_tamper(tmp_path, configured, pki, fmt):
    creds = sc.load_signing_credentials(configured)
    assert creds.kind == "configured" and creds.trust_anchors_pem
    make = make_mp4 if fmt == "mp4" else make_png
    target = make(tmp_path / f"target.{fmt}", seed=1)
    output = make(tmp_path / f"swapped.{fmt}", seed=2)     # the unsigned pipeline output
    source = make_png(tmp_path / "face.png", seed=3)

    res = prov.sign_and_verify(output, **sign_kwargs(creds, target, source))
    assert res.ok and res.signed, res.error
    assert res.validation_state == "Trusted" and res.failure_codes == []
    assert res.output_sha256 == sha256_file(output) != res.input_sha256
    assert res.signer_fingerprint == creds.fingerprint_sha256
    assert not list(tmp_path.glob(".*signing*")), "temp file left behind"

    trusted = prov.verify_media(output, pki[2].read_text())
    assert trusted.state == "Trusted" and trusted.failure_codes == []
    untrusted = prov.verify_media(output)
    assert untrusted.state == "Valid" and untrusted.failure_codes == [UNTRUSTED]

    rels = {i["relationship"]: i for i in trusted.ingredients}
    assert set(rels) == {"parentOf", "componentOf"}
    assert rels["parentOf"]["title"] == "target clip"
    assert rels["parentOf"]["sha256"] == sha256_file(target)
    assert rels["componentOf"]["sha256"] == sha256_file(source)
    assert [a["action"] for a in trusted.actions] == ["c2pa.opened", "c2pa.edited"]
    edited = trusted.actions[1]
    assert edited["digitalSourceType"] == prov.FACE_SWAP_SOURCE_TYPE
    assert edited["softwareAgent"]["name"] == "Swapline 0.1.0-test"
    qa = trusted.qa
    assert qa["qa"]["decision"] == "pass" and abs(qa["qa"]["min_identity"] - 0.61) < 1e-6
    assert qa["models"] == [{"name": "inswapper_128.onnx", "sha256": "ab" * 32}]
    assert qa["attestation"].startswith("Consent") and qa["signer"]["kind"] == "configured"

    flip_in_box(output, b"mdat" if fmt == "mp4" else b"IDAT")
    broken = prov.verify_media(output, pki[2].read_text())
    assert broken.state == "Invalid"
    expect = "bmffHash.mismatch" if fmt == "mp4" else "dataHash.mismatch"
    assert any(c.endswith(expect) for c in broken.failure_codes), broken.failure_codes


def test_jpeg_and_output_beside_input(tmp_path, configured):
    from PIL import Image
    creds = sc.load_signing_credentials(configured)
    src = tmp_path / "in.jpg"
    Image.fromarray(np.full((32, 32, 3), 90, np.uint8)).save(src)
    res = prov.sign_and_verify(src, tmp_path / "out.jpg",
                               **{**sign_kwargs(creds, src, src), "source_ingredient": None})
    assert res.ok, res.error
    v = prov.verify_media(tmp_path / "out.jpg", creds.trust_anchors_pem)
    assert v.state == "Trusted" and [i["relationship"] for i in v.ingredients] == ["parentOf"]
    assert sha256_file(src) == res.input_sha256            # the input itself is untouched


@pytest.mark.parametrize("algorithm", ["es384", "ps256", "ed25519"])
def test_other_algorithms(tmp_path, algorithm):
    chain, key, root = make_pki(tmp_path / "pki", algorithm)
    write_config(tmp_path, cert_chain=str(chain), private_key=str(key), algorithm=algorithm,
                 trust_anchors=str(root))
    creds = sc.load_signing_credentials(tmp_path)
    img = make_png(tmp_path / "a.png")
    res = prov.sign_and_verify(img, **{**sign_kwargs(creds, img, img), "source_ingredient": None})
    assert res.ok and res.validation_state == "Trusted", res.error


def test_ingredient_in_format_c2pa_cannot_parse_is_declared(tmp_path, configured):
    from PIL import Image
    creds = sc.load_signing_credentials(configured)
    face = tmp_path / "face.bmp"                          # c2pa reads no BMP
    Image.fromarray(np.full((8, 8, 3), 200, np.uint8)).save(face)
    out = make_png(tmp_path / "out.png")
    res = prov.sign_and_verify(out, **sign_kwargs(creds, out, face))
    assert res.ok, res.error
    comp = [i for i in res.verify.ingredients if i["relationship"] == "componentOf"]
    assert comp[0]["sha256"] == sha256_file(face) and comp[0]["format"] == "image/bmp"


def test_unsigned_file_reports_no_manifest(tmp_path):
    assert prov.verify_media(make_png(tmp_path / "plain.png")).state == "NoManifest"


# ---- lose nothing --------------------------------------------------------------------------

def test_failed_verification_keeps_unsigned_output(tmp_path, configured):
    creds = sc.load_signing_credentials(configured)
    other_root = make_pki(tmp_path / "other", tag="other")[2].read_text()
    out = make_mp4(tmp_path / "swapped.mp4")
    before = out.read_bytes()
    # Anchors that do not vouch for our signer: read-back is Valid, not the Trusted we demand.
    res = prov.sign_and_verify(out, trust_anchors_pem=other_root,
                               **sign_kwargs(creds, out, make_png(tmp_path / "f.png")))
    assert not res.ok and not res.signed
    assert "kept unsigned" in res.error and "Valid" in res.error
    assert out.read_bytes() == before
    assert prov.verify_media(out).state == "NoManifest"
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["f.png", "swapped.mp4"]


def test_failed_signing_copies_unsigned_input_to_output(tmp_path, configured):
    creds = sc.load_signing_credentials(configured)
    src = make_png(tmp_path / "render.png")
    res = prov.sign_and_verify(src, tmp_path / "final.png",
                               **{**sign_kwargs(creds, src, tmp_path / "missing-face.png")})
    assert not res.ok and "missing-face.png" in res.error
    assert (tmp_path / "final.png").read_bytes() == src.read_bytes()
    assert res.output_sha256 == sha256_file(src)


# ---- credentials -----------------------------------------------------------------------------

def test_dev_credentials_generated_once_and_reused(tmp_path):
    first = sc.load_signing_credentials(tmp_path)           # no signing.json: development
    assert first.kind == "development" and first.is_development
    folder = sc.dev_signer_dir(tmp_path)
    key_files = [p for p in folder.iterdir() if "key" in p.name]
    assert key_files and all((p.stat().st_mode & 0o777) == 0o600 for p in key_files)
    mtimes = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    second = sc.dev_credentials(tmp_path)
    assert second.fingerprint_sha256 == first.fingerprint_sha256
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == mtimes

    img = make_png(tmp_path / "a.png")
    res = prov.sign_and_verify(img, **{**sign_kwargs(second, img, img), "source_ingredient": None})
    assert res.ok and res.signer_kind == "development", res.error
    v = prov.verify_media(img)
    assert v.state == "Valid" and v.failure_codes == [UNTRUSTED]
    assert v.qa["signer"]["kind"] == "development"


def test_require_trusted_refuses_dev_signer(tmp_path):
    with pytest.raises(sc.SigningConfigError) as e:
        sc.load_signing_credentials(tmp_path, require_trusted=True)
    assert str(sc.config_path(tmp_path)) in str(e.value) and "trusted" in str(e.value)
    assert not sc.dev_signer_dir(tmp_path).exists()


def _config_error(user, **fields):
    path = write_config(user, **fields)
    with pytest.raises(sc.SigningConfigError) as e:
        sc.load_signing_credentials(user)
    assert str(path) in str(e.value)
    return e.value


def test_config_errors_name_file_and_field(tmp_path, pki):
    chain, key, root = (str(p) for p in pki)
    ok = dict(cert_chain=chain, private_key=key, algorithm="es256")
    cases = [
        ({**ok, "private_key": ""}, "private_key"),
        ({k: v for k, v in ok.items() if k != "cert_chain"}, "cert_chain"),
        ({**ok, "algorithm": "rs1"}, "algorithm"),
        ({**ok, "algorithm": "es384"}, "algorithm"),                 # key is P-256
        ({**ok, "tsa_url": "http://timestamp.example"}, "tsa_url"),
        ({**ok, "cert_chain": str(tmp_path / "nope.pem")}, "cert_chain"),
        ({**ok, "private_key": chain}, "private_key"),               # not a key
        ({**ok, "trust_anchors": key}, "trust_anchors"),             # not a certificate
        ({**ok, "privat_key": key}, "privat_key"),                   # typo
    ]
    for fields, field_name in cases:
        err = _config_error(tmp_path / field_name, **fields)
        assert err.field == field_name and f"field '{field_name}'" in str(err), (fields, err)

    other_key = make_pki(tmp_path / "other", tag="other")[1]
    err = _config_error(tmp_path / "mismatch", **{**ok, "private_key": str(other_key)})
    assert err.field == "private_key" and "does not belong" in str(err)
    selfsigned = make_pki(tmp_path / "self", self_signed_leaf=True)
    err = _config_error(tmp_path / "selfsigned", cert_chain=str(selfsigned[0]),
                        private_key=str(selfsigned[1]), algorithm="es256")
    assert err.field == "cert_chain" and "self-signed" in str(err)

    bad = sc.config_path(tmp_path / "badjson")
    bad.parent.mkdir(parents=True)
    bad.write_text("{not json")
    with pytest.raises(sc.SigningConfigError, match="not valid JSON") as e:
        sc.load_signing_credentials(tmp_path / "badjson")
    assert str(bad) in str(e.value)
    with pytest.raises(sc.SigningConfigError, match="cannot be read"):
        sc.load_config(tmp_path / "absent" / "signing.json")


def test_private_key_never_leaks(tmp_path, configured):
    creds = sc.load_signing_credentials(configured)
    key_pem = creds.private_key_path.read_bytes()
    key = serialization.load_pem_private_key(key_pem, None)
    key_der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    body = b"".join(key_pem.split(b"\n")[1:-2])             # the base64 between the markers
    scalar = key.private_numbers().private_value.to_bytes(32, "big")   # the secret itself
    secrets = [key_der, body, base64.b64encode(key_der), scalar, scalar.hex().encode()]

    out = make_png(tmp_path / "o.png")
    res = prov.sign_and_verify(out, **sign_kwargs(creds, out, make_png(tmp_path / "f.png")))
    assert res.ok and res.manifest_bytes
    texts = [repr(res), repr(res.verify), repr(creds), str(creds.describe())]
    for blob in [res.manifest_bytes, out.read_bytes()] + [t.encode() for t in texts]:
        for secret in secrets:
            assert secret not in blob
    assert "PRIVATE" not in "".join(texts)


def test_folder_target_is_declared_with_one_digest_of_its_frames(tmp_path, configured):
    # an image-sequence input (Load Video Frames on a folder): the parent ingredient is the folder
    from swapline_core.provenance.hashing import sha256_media
    creds = sc.load_signing_credentials(configured)
    frames = tmp_path / "frames"
    frames.mkdir()
    for i in range(3):
        make_png(frames / f"{i:04d}.png", seed=i)
    out = make_png(tmp_path / "out.png", seed=9)
    res = prov.sign_and_verify(out, **sign_kwargs(creds, frames, make_png(tmp_path / "face.png", seed=5)))
    assert res.ok, res.error
    parent = [i for i in res.verify.ingredients if i["relationship"] == "parentOf"]
    assert parent[0]["format"] == "inode/directory"
    digest = sha256_media(frames)
    assert parent[0]["sha256"] == digest
    make_png(frames / "0001.png", seed=7)                   # one frame changed: another digest
    assert sha256_media(frames) != digest
