"""A codec server: lets the Temporal Web UI and CLI show encrypted payloads to key holders.

::

    STATECORE_ENCRYPTION_KEYS=2025:... python -m statecore.temporal.codec_server --port 8081
    temporal server start-dev --ui-codec-endpoint http://127.0.0.1:8081

It implements Temporal's remote codec protocol: ``POST .../decode`` and ``POST .../encode``
take and return ``{"payloads": [...]}`` in protobuf JSON (metadata values and data base64),
judged by the last path segment only, so it can be mounted under any prefix. The browser calls
it directly, so it answers CORS for the UI's origins (and refuses other origins), can demand a
bearer token, and listens on 127.0.0.1 unless told otherwise: whoever reaches it can decrypt.
Standard library HTTP only; each request runs in its own thread.
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import json
import logging
import threading
from collections.abc import Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads
from temporalio.converter import PayloadCodec

from statecore.core._errors import StatecoreError

log = logging.getLogger("statecore.temporal.codec_server")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8081
#: The dev server's Web UI, under both names a browser may use for it.
DEFAULT_ALLOWED_ORIGINS = ("http://localhost:8233", "http://127.0.0.1:8233")
#: A payload is at most 2 MiB; the UI sends one event's payloads per request.
MAX_BODY_BYTES = 32 * 1024 * 1024
_ALLOWED_HEADERS = "Content-Type, X-Namespace, Authorization"


class CodecServer(ThreadingHTTPServer):
    """An HTTP server applying ``codec`` for remote callers (see module docs).

    Args:
        codec: the codec to apply, e.g. ``statecore.temporal._encryption.EncryptionCodec``.
        host, port: where to listen; port 0 picks a free one (see ``url``).
        allowed_origins: browser origins (scheme://host:port) the UI is served from.
        token: when set, requests need ``Authorization: Bearer <token>``.
    """

    daemon_threads = True

    def __init__(
        self,
        codec: PayloadCodec,
        *,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        allowed_origins: Sequence[str] = DEFAULT_ALLOWED_ORIGINS,
        token: str | None = None,
    ) -> None:
        if not isinstance(codec, PayloadCodec):
            raise ValueError("codec must be a temporalio.converter.PayloadCodec")
        if token is not None and not token.strip():
            raise ValueError("a bearer token must not be empty")
        self.codec = codec
        self.allowed_origins = frozenset(o.rstrip("/") for o in allowed_origins)
        self.token = token
        self._thread: threading.Thread | None = None
        super().__init__((host, port), _CodecRequestHandler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        # socketserver types the host as str | bytes; an IPv4 or IPv6 TCP server gives str.
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{host}:{port}"

    def start(self) -> CodecServer:
        """Serve from a background thread (for embedding and tests); ``stop`` ends it."""
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.1}, name="codec-server"
        )
        self._thread.daemon = True
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def authorized(self, header: str | None) -> bool:
        if self.token is None:
            return True
        expected = f"Bearer {self.token}".encode()
        return hmac.compare_digest((header or "").encode(), expected)


class _CodecRequestHandler(BaseHTTPRequestHandler):
    server: CodecServer
    protocol_version = "HTTP/1.1"
    #: A POST whose body is not read yet (see ``_reply``).
    _body_pending = False

    def do_OPTIONS(self) -> None:
        """CORS preflight: the browser asks before its cross-origin JSON POST."""
        origin = self.headers.get("Origin")
        if origin is None or not self._origin_allowed(origin):
            self._reply(HTTPStatus.FORBIDDEN, {"error": f"origin {origin!r} is not allowed"})
            return
        self._reply(HTTPStatus.NO_CONTENT, None, {"Access-Control-Max-Age": "600"})

    def do_POST(self) -> None:
        self._body_pending = True
        origin = self.headers.get("Origin")
        if origin is not None and not self._origin_allowed(origin):
            self._reply(HTTPStatus.FORBIDDEN, {"error": f"origin {origin!r} is not allowed"})
            return
        operation = urlsplit(self.path).path.rstrip("/").rsplit("/", 1)[-1]
        if operation not in ("encode", "decode"):
            self._reply(HTTPStatus.NOT_FOUND, {"error": "POST to .../encode or .../decode"})
            return
        if not self.server.authorized(self.headers.get("Authorization")):
            self._reply(
                HTTPStatus.UNAUTHORIZED,
                {"error": "a valid 'Authorization: Bearer <token>' header is required"},
                {"WWW-Authenticate": "Bearer"},
            )
            return
        body = self._read_body()
        if body is None:
            return
        try:
            request = json_format.Parse(body, Payloads())
        except json_format.ParseError as exc:
            self._reply(HTTPStatus.BAD_REQUEST, {"error": f"not a Payloads JSON object: {exc}"})
            return
        apply = self.server.codec.encode if operation == "encode" else self.server.codec.decode
        try:
            result = asyncio.run(apply(list(request.payloads)))
        except StatecoreError as exc:  # e.g. an unknown key id or a tampered payload
            self._reply(HTTPStatus.UNPROCESSABLE_ENTITY, {"error": exc.message, "code": exc.code})
            return
        self._reply(HTTPStatus.OK, json_format.MessageToDict(Payloads(payloads=result)))

    def _read_body(self) -> bytes | None:
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self._reply(HTTPStatus.LENGTH_REQUIRED, {"error": "Content-Length is required"})
            return None
        if int(length) > MAX_BODY_BYTES:
            self._reply(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                {"error": f"request body over {MAX_BODY_BYTES} bytes"},
            )
            return None
        self._body_pending = False
        return self.rfile.read(int(length))

    def _origin_allowed(self, origin: str) -> bool:
        return origin.rstrip("/") in self.server.allowed_origins

    def _reply(
        self,
        status: HTTPStatus,
        body: object | None,
        headers: dict[str, str] | None = None,
    ) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        if self._body_pending:
            # A request refused before its body was read: on a kept-alive connection the
            # unread body would be parsed as the next request.
            self.close_connection = True
            self.send_header("Connection", "close")
        origin = self.headers.get("Origin")
        if origin is not None and self._origin_allowed(origin):
            self.send_header("Access-Control-Allow-Origin", origin)
            self.send_header("Access-Control-Allow-Methods", "POST, OPTIONS")
            self.send_header("Access-Control-Allow-Headers", _ALLOWED_HEADERS)
            self.send_header("Access-Control-Allow-Credentials", "true")
        self.send_header("Vary", "Origin")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        # Request lines only (method, path, status): never payloads or headers.
        log.info("%s - %s", self.address_string(), format % args)


def main(argv: list[str] | None = None) -> None:
    """``python -m statecore.temporal.codec_server``: flags override the environment
    (statecore.temporal._environment, where an empty variable counts as unset)."""
    from statecore.temporal._environment import (
        Environment,
        SettingError,
        flag_type,
        parse_log_level,
        parse_port,
        pick,
    )

    env = Environment.from_process()
    p = argparse.ArgumentParser(
        description="Decode statecore's encrypted payloads for the Temporal Web UI and CLI."
    )
    p.add_argument(
        "--keys",
        help="comma-separated id:base64key, newest last (default: $STATECORE_ENCRYPTION_KEYS;"
        " prefer it, flags show in the process list)",
    )
    p.add_argument("--host", default=DEFAULT_HOST, help="interface to listen on")
    p.add_argument("--port", type=flag_type(parse_port), default=DEFAULT_PORT)
    p.add_argument(
        "--allowed-origin",
        action="append",
        help="Web UI origin allowed to call (repeatable; default: the dev server's UI on 8233)",
    )
    p.add_argument(
        "--token",
        help="require 'Authorization: Bearer <token>' (default: $STATECORE_CODEC_TOKEN)",
    )
    p.add_argument(
        "--log-level",
        type=flag_type(parse_log_level),
        help="default: $STATECORE_LOG_LEVEL, else INFO",
    )
    args = p.parse_args(argv)
    try:
        level = pick(args.log_level, env, "STATECORE_LOG_LEVEL", parse_log_level, "INFO")
    except SettingError as exc:
        p.error(exc.message)
    keys = args.keys or env.text("STATECORE_ENCRYPTION_KEYS")
    token = args.token or env.text("STATECORE_CODEC_TOKEN")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not keys:
        p.error("no keys: pass --keys or set STATECORE_ENCRYPTION_KEYS")
    # Imported here: cryptography comes with the optional `encryption` extra.
    from statecore.temporal._encryption import EncryptionCodec, Keyring

    try:
        keyring = Keyring.parse(keys)
    except ValueError as exc:
        p.error(str(exc))
    server = CodecServer(
        EncryptionCodec(keyring),
        host=args.host,
        port=args.port,
        allowed_origins=args.allowed_origin or DEFAULT_ALLOWED_ORIGINS,
        token=token,
    )
    log.info(
        "codec server on %s for origins %s; keys %s%s",
        server.url,
        ", ".join(sorted(server.allowed_origins)),
        ", ".join(keyring.key_ids),
        "; bearer token required" if token else "",
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        log.info("stopped")
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
