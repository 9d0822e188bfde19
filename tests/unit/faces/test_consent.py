"""Consent bound to the source identity: recorded in the face model, kept through save/load,
refused when copied onto another identity, and stated (structured) in the signed manifest."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from swapline_core.errors import SwaplineError
from swapline_core.faces import identity
from swapline_core.types import Face, SourceIdentity

DOC = "ab" * 32


def face_model(seed=0) -> SourceIdentity:
    rng = np.random.default_rng(seed)
    image = rng.integers(0, 255, (40, 40, 3), dtype=np.uint8)
    face = Face(bbox=np.array([5, 5, 35, 35], np.float32), kps=np.zeros((5, 2), np.float32), score=1.0,
                embedding=np.ones(512, np.float32) / np.sqrt(512))
    return identity.build([image], [face], "test-recognizer")


def test_consent_round_trips_through_the_safetensors_file(tmp_path):
    fm = face_model()
    assert identity.consent_of(fm) is None
    c = identity.make_consent(fm, " Jane Doe ", "2026-11-01", "campaign X, web, until 2027-12-31", DOC.upper())
    assert c == {"schema": identity.CONSENT_SCHEMA, "given_by": "Jane Doe", "date": "2026-11-01",
                 "scope": "campaign X, web, until 2027-12-31", "document_sha256": DOC, "recorded_by": None,
                 "source_sha256": fm.metadata["source_sha256"]}
    path = str(tmp_path / "jane.safetensors")
    identity.save(identity.with_consent(fm, c), path)
    from safetensors import safe_open
    with safe_open(path, "np") as f:                     # in the file's own metadata, not beside it
        assert '"given_by": "Jane Doe"' in f.metadata()["metadata"]
    assert identity.consent_of(identity.load(path)) == c


def test_consent_copied_onto_another_identity_does_not_count():
    c = identity.make_consent(face_model(0), "Jane Doe", "2026-11-01", "campaign X")
    other = identity.with_consent(face_model(1), c)
    assert identity.consent_of(other) is None


@pytest.mark.parametrize("args, field", [
    (("", "2026-11-01", "scope"), "consent_given_by"),
    (("Jane", "2026-11-01", " "), "consent_scope"),
    (("Jane", "1 Nov 2026", "scope"), "consent_date"),
    (("Jane", "2026-11-01", "scope", "not-a-hash"), "consent_document_sha256"),
])
def test_bad_consent_fields_are_named(args, field):
    with pytest.raises(SwaplineError, match=field):
        identity.make_consent(face_model(), *args)


def test_consent_is_stated_structured_in_the_signed_manifest(tmp_path):
    from swapline_core.provenance import c2pa as prov
    from swapline_core.provenance import signing as sc

    fm = face_model()
    c = identity.make_consent(fm, "Jane Doe", "2026-11-01", "campaign X", DOC)
    fm = identity.with_consent(fm, c)
    creds = sc.load_signing_credentials(tmp_path / "user")
    out, target = tmp_path / "out.png", tmp_path / "target.png"
    Image.fromarray(np.full((16, 16, 3), 10, np.uint8)).save(out)
    Image.fromarray(np.full((16, 16, 3), 20, np.uint8)).save(target)
    res = prov.sign_and_verify(out, creds=creds, target_ingredient=(target, "t"), source_ingredient=None,
                               qa_summary={}, models=[], attestation=None, consent=identity.consent_of(fm))
    assert res.signed, res.error
    assert prov.verify_media(out, creds.trust_anchors_pem).qa["consent"] == c
