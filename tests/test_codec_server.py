"""The codec server over real HTTP: Temporal's remote codec protocol, CORS, the bearer token."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from statecore.temporal._devserver import free_port
from statecore.temporal._encryption import EncryptionCodec, Keyring, generate_key
from statecore.temporal.codec_server import CodecServer, main

SECRET = "launch code: orchid-42-vermilion"
UI_ORIGIN = "http://localhost:8233"
TOKEN = "operator-token-123"
CODEC = EncryptionCodec(Keyring([("k1", generate_key())]))


@pytest.fixture
def server() -> Iterator[CodecServer]:
    running = CodecServer(CODEC, port=0, token=TOKEN).start()
    try:
        yield running
    finally:
        running.stop()


def body_of(*payloads: Payload) -> dict:
    return json_format.MessageToDict(Payloads(payloads=payloads))


def payloads_of(response: httpx.Response) -> list[Payload]:
    return list(json_format.ParseDict(response.json(), Payloads()).payloads)


def plain(text: str) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(text).encode())


def post(server: CodecServer, path: str, body: object, **headers: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {TOKEN}", **headers}
    return httpx.post(f"{server.url}{path}", json=body, headers=headers, timeout=10)


def test_decode_returns_the_plaintext_payload(server: CodecServer) -> None:
    sealed = CODEC.encrypt(plain(SECRET))
    response = post(server, "/decode", body_of(sealed))
    assert response.status_code == 200
    # Temporal's JSON form: metadata values and data are base64.
    [raw] = response.json()["payloads"]
    assert base64.b64decode(raw["metadata"]["encoding"]) == b"json/plain"
    assert json.loads(base64.b64decode(raw["data"])) == SECRET
    assert payloads_of(response) == [plain(SECRET)]


def test_encode_then_decode_round_trips_under_any_path_prefix(server: CodecServer) -> None:
    encoded = post(server, "/codec/default/encode", body_of(plain(SECRET), plain("two")))
    assert encoded.status_code == 200
    sealed = payloads_of(encoded)
    assert [p.metadata["encoding"] for p in sealed] == [b"binary/encrypted"] * 2
    assert SECRET.encode() not in encoded.content
    decoded = post(server, "/codec/default/decode", body_of(*sealed))
    assert payloads_of(decoded) == [plain(SECRET), plain("two")]


def test_a_wrong_or_missing_bearer_token_decodes_nothing(server: CodecServer) -> None:
    sealed = CODEC.encrypt(plain(SECRET))
    for auth in ("Bearer wrong-token", f"Bearer {TOKEN}x", "", TOKEN):
        response = post(server, "/decode", body_of(sealed), Authorization=auth)
        assert response.status_code == 401, auth
        assert response.headers["WWW-Authenticate"] == "Bearer"
        assert SECRET not in response.text


def test_a_refused_request_does_not_poison_a_kept_alive_connection(
    server: CodecServer,
) -> None:
    sealed = CODEC.encrypt(plain(SECRET))
    with httpx.Client(base_url=server.url, timeout=10) as http:  # one pooled connection
        refused = http.post("/decode", json=body_of(sealed), headers={"Authorization": "x"})
        preflight = http.options("/decode", headers={"Origin": UI_ORIGIN})
        decoded = http.post(
            "/decode", json=body_of(sealed), headers={"Authorization": f"Bearer {TOKEN}"}
        )
    assert refused.status_code == 401
    assert preflight.status_code == 204  # not the refused body read as a request line
    assert payloads_of(decoded) == [plain(SECRET)]


def test_cors_preflight_answers_the_ui_origin_only(server: CodecServer) -> None:
    preflight = httpx.options(
        f"{server.url}/decode",
        headers={
            "Origin": UI_ORIGIN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type,x-namespace,authorization",
        },
    )
    assert preflight.status_code == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == UI_ORIGIN
    assert "POST" in preflight.headers["Access-Control-Allow-Methods"]
    allowed = preflight.headers["Access-Control-Allow-Headers"].lower()
    assert {"content-type", "x-namespace", "authorization"} <= {
        h.strip() for h in allowed.split(",")
    }
    stranger = httpx.options(f"{server.url}/decode", headers={"Origin": "http://evil.example"})
    assert stranger.status_code == 403
    assert "Access-Control-Allow-Origin" not in stranger.headers


def test_posts_from_another_origin_are_refused(server: CodecServer) -> None:
    sealed = CODEC.encrypt(plain(SECRET))
    refused = post(server, "/decode", body_of(sealed), Origin="http://evil.example")
    assert refused.status_code == 403
    assert SECRET not in refused.text
    allowed = post(server, "/decode", body_of(sealed), Origin=UI_ORIGIN)
    assert allowed.status_code == 200
    assert allowed.headers["Access-Control-Allow-Origin"] == UI_ORIGIN


def test_unknown_key_and_tampering_are_errors_not_ciphertext(server: CodecServer) -> None:
    foreign = EncryptionCodec(Keyring([("other", generate_key())])).encrypt(plain("x"))
    unknown = post(server, "/decode", body_of(foreign))
    assert unknown.status_code == 422
    assert unknown.json()["code"] == "UnknownEncryptionKey"
    sealed = CODEC.encrypt(plain(SECRET))
    tampered = Payload(metadata=dict(sealed.metadata), data=sealed.data[:-1] + b"\x00")
    rejected = post(server, "/decode", body_of(tampered))
    assert rejected.status_code == 422
    assert rejected.json()["code"] == "PayloadDecryptionFailed"


def test_bad_requests_get_clear_statuses(server: CodecServer) -> None:
    assert post(server, "/decode", {"payloads": "nope"}).status_code == 400
    assert post(server, "/decode", ["not", "an", "object"]).status_code == 400
    assert post(server, "/transcode", {"payloads": []}).status_code == 404
    empty = post(server, "/decode", {"payloads": []})
    assert empty.status_code == 200 and payloads_of(empty) == []


def test_without_a_token_the_server_is_open_to_local_callers() -> None:
    server = CodecServer(CODEC, port=0).start()
    try:
        response = httpx.post(f"{server.url}/encode", json=body_of(plain("x")), timeout=10)
        assert response.status_code == 200
        assert server.url.startswith("http://127.0.0.1:")
    finally:
        server.stop()


def test_cli_refuses_missing_or_malformed_keys(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("STATECORE_ENCRYPTION_KEYS", raising=False)
    with pytest.raises(SystemExit) as missing:
        main(["--port", "0"])
    assert missing.value.code == 2
    assert "no keys" in capsys.readouterr().err
    with pytest.raises(SystemExit) as short:
        main(["--port", "0", "--keys", "k1:" + bytes(16).hex()])
    assert short.value.code == 2
    assert "256" in capsys.readouterr().err


def test_an_empty_token_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="empty"):
        CodecServer(CODEC, port=0, token="  ")


def test_empty_variables_count_as_unset_and_bad_ones_are_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The worker's rule: STATECORE_ENCRYPTION_KEYS= is no keyring, not a keyring named "".
    monkeypatch.setenv("STATECORE_ENCRYPTION_KEYS", "")
    with pytest.raises(SystemExit) as empty:
        main(["--port", "0"])
    assert empty.value.code == 2
    assert "no keys: pass --keys or set STATECORE_ENCRYPTION_KEYS" in capsys.readouterr().err

    monkeypatch.setenv("STATECORE_LOG_LEVEL", "loud")
    with pytest.raises(SystemExit) as bad:
        main(["--port", "0", "--keys", f"k1:{base64.b64encode(bytes(32)).decode()}"])
    assert bad.value.code == 2
    assert "STATECORE_LOG_LEVEL: 'loud' is not a log level" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--port", "http"])
    assert "--port: 'http' is not a port number" in capsys.readouterr().err


def test_an_empty_token_variable_leaves_the_server_open_like_an_unset_one() -> None:
    """Run as operators run it; STATECORE_CODEC_TOKEN= starts it without a token (before the
    one reader it crashed on the empty token) and it decodes for a local caller."""
    key = f"k1:{base64.b64encode(bytes(range(32))).decode()}"
    env = {
        "PATH": "/usr/bin:/bin",
        "STATECORE_ENCRYPTION_KEYS": key,
        "STATECORE_CODEC_TOKEN": "",
        "STATECORE_LOG_LEVEL": "",
    }
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "statecore.temporal.codec_server", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        codec = EncryptionCodec(Keyring.parse(key))
        (encrypted,) = asyncio.run(codec.encode([plain(SECRET)]))
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.communicate()[0]
            try:
                answer = httpx.post(
                    f"http://127.0.0.1:{port}/decode", json=body_of(encrypted), timeout=5
                )
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline, "codec server not listening within 30s"
                time.sleep(0.2)
        assert answer.status_code == 200
        assert json.loads(payloads_of(answer)[0].data) == SECRET
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert "bearer token required" not in out
