"""Webhook delivery against a real local HTTP server that fails the first attempts: signature over
the exact body, retries with backoff, giving up with every attempt's error, nothing logged that
holds the secret; atomic copy of outputs."""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import random
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

FARM = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(FARM), str(FARM.parent)]

from swapline_farm import delivery  # noqa: E402

SECRET = b"s3cret-for-tests-only"


class Receiver:
    """A webhook receiver: answers ``fail_first`` calls with ``fail_status`` (None: drops the
    connection without an answer), then 200; keeps every request's headers and raw body."""

    def __init__(self, fail_first: int = 0, fail_status: int | None = 503):
        self.fail_first, self.fail_status, self.calls = fail_first, fail_status, []
        rec = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                rec.calls.append({"headers": dict(self.headers), "body": body, "path": self.path})
                if len(rec.calls) <= rec.fail_first:
                    if rec.fail_status is None:
                        self.close_connection = True
                        self.connection.shutdown(2)     # no answer at all: the client sees a reset
                        return
                    self.send_response(rec.fail_status)
                    self.end_headers()
                    self.wfile.write(b"try later")
                    return
                ok = delivery.verify(body, self.headers.get(delivery.SIGNATURE_HEADER), SECRET)
                self.send_response(200 if ok else 401)
                self.end_headers()
                self.wfile.write(b"ok" if ok else b"bad signature")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def _no_secret_logged(caplog, result):
    text = "\n".join(r.getMessage() for r in caplog.records) + json.dumps(result)
    assert SECRET.decode() not in text


PAYLOAD = {"job_id": "abc123", "state": "done", "output": "/out/clip.mp4", "qa": {"decision": "pass"}}


def test_retries_until_delivered_and_signs_the_exact_body(caplog):
    caplog.set_level(logging.DEBUG, "swapline_farm")
    delays = []
    with Receiver(fail_first=2) as rx:
        res = delivery.deliver_webhook(rx.url + "?token=abc", PAYLOAD, SECRET, attempts=5, base_delay=0.01,
                                       rng=random.Random(0), sleep=lambda d: delays.append(d))
    assert res["ok"] and res["status"] == 200, res
    assert [a["status"] for a in res["attempts"]] == [503, 503, 200]
    assert res["attempts"][0]["error"].startswith("HTTP 503")
    assert res["attempts"][-1]["error"] is None
    assert len(rx.calls) == 3
    for call in rx.calls:                                        # the same body and signature each time
        assert json.loads(call["body"]) == PAYLOAD
        expected = "sha256=" + hmac.new(SECRET, call["body"], hashlib.sha256).hexdigest()
        assert call["headers"][delivery.SIGNATURE_HEADER] == expected
        assert call["headers"]["Content-Type"] == "application/json"
        assert call["headers"][delivery.DELIVERY_HEADER] == res["delivery_id"]
    # exponential backoff with jitter: each delay within [d/2, d] of base * 2**k
    assert len(delays) == 2
    for k, d in enumerate(delays):
        full = 0.01 * 2 ** k
        assert full / 2 <= d <= full
    assert res["url"].endswith("/hook?<redacted>") and "token" not in json.dumps(res)
    _no_secret_logged(caplog, res)


def test_gives_up_after_n_attempts_with_every_error(caplog):
    caplog.set_level(logging.DEBUG, "swapline_farm")
    with Receiver(fail_first=100, fail_status=None) as rx:       # never answers
        res = delivery.deliver_webhook(rx.url, PAYLOAD, SECRET, attempts=3, base_delay=0.001)
    assert not res["ok"]
    assert len(res["attempts"]) == 3 == len(rx.calls)
    assert all(a["status"] is None and a["error"] for a in res["attempts"])
    assert res["gave_up"] == "3 attempts failed"
    assert [a["retry_in"] is not None for a in res["attempts"]] == [True, True, False]
    _no_secret_logged(caplog, res)


def test_a_refused_signature_is_not_retried():
    with Receiver() as rx:
        res = delivery.deliver_webhook(rx.url, PAYLOAD, b"wrong-secret", attempts=5, base_delay=0.001)
    assert not res["ok"] and res["status"] == 401 and len(rx.calls) == 1
    assert "not retryable" in res["gave_up"]


def test_connection_refused_is_retried():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]                                 # nothing listens here once closed
    res = delivery.deliver_webhook(f"http://127.0.0.1:{port}/x", PAYLOAD, None, attempts=2, base_delay=0.001)
    assert not res["ok"] and len(res["attempts"]) == 2
    assert "Connection" in res["attempts"][0]["error"] or "refused" in res["attempts"][0]["error"].lower()


def test_bad_arguments_and_secret_config(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="not an http"):
        delivery.deliver_webhook("ftp://host/x", {}, None)
    with pytest.raises(ValueError, match="attempts"):
        delivery.deliver_webhook("http://127.0.0.1:1/x", {}, None, attempts=0)
    monkeypatch.setenv("SWAPLINE_TEST_HOOK_SECRET", "from-env")
    assert delivery.resolve_secret({"webhook_secret_env": "SWAPLINE_TEST_HOOK_SECRET"}) == b"from-env"
    with pytest.raises(ValueError, match="SWAPLINE_TEST_UNSET"):
        delivery.resolve_secret({"webhook_secret_env": "SWAPLINE_TEST_UNSET"})
    (tmp_path / "secret").write_text("from-file\n")
    assert delivery.resolve_secret({"webhook_secret_file": str(tmp_path / "secret")}) == b"from-file"
    assert delivery.resolve_secret({"webhook_secret": "inline"}) == b"inline"
    assert delivery.resolve_secret({}) is None


def test_copy_outputs_is_atomic_and_complete(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    a, b = src / "clip.mp4", src / "clip_qa.json"
    a.write_bytes(os.urandom(3 << 20))
    b.write_text('{"decision": "pass"}')
    dest = tmp_path / "deliveries" / "show" / "ep1"
    out = delivery.copy_outputs([a, b], dest)
    assert out == [dest / "clip.mp4", dest / "clip_qa.json"]
    assert (dest / "clip.mp4").read_bytes() == a.read_bytes()
    assert sorted(p.name for p in dest.iterdir()) == ["clip.mp4", "clip_qa.json"]   # no temp files left
    a.write_bytes(b"re-run")                                      # a re-delivered job replaces its file
    delivery.copy_outputs([a], dest)
    assert (dest / "clip.mp4").read_bytes() == b"re-run"
    with pytest.raises(FileNotFoundError, match="gone.mp4"):
        delivery.copy_outputs([src / "gone.mp4"], dest)
    other = tmp_path / "other"
    other.mkdir()
    (other / "clip.mp4").write_bytes(b"x")
    with pytest.raises(ValueError, match="clip.mp4"):
        delivery.copy_outputs([a, other / "clip.mp4"], dest)
    with pytest.raises(NotADirectoryError):
        delivery.copy_outputs([a], dest / "clip.mp4")
