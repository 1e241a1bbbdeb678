"""A TLS-terminating proxy (HAProxy) in front of a plaintext Temporal dev server, with a
throwaway CA, a server certificate and a client certificate made by ``openssl``.

The proxy requires a client certificate signed by the CA (``verify required``), so it stands
in for a cluster with mTLS; a client without the CA, or without its certificate, is refused.
HAProxy rather than stunnel: gRPC clients insist on ALPN ``h2`` (tonic fails with
``H2NotNegotiated`` without it), which stunnel 5.68 cannot offer and HAProxy's ``alpn h2`` does;
past the handshake it relays bytes, and the dev server speaks HTTP/2 in the clear.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from statecore.temporal._devserver import free_port

#: The name the server certificate is issued to (and the only one it is valid for).
SERVER_NAME = "temporal.statecore.test"


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


@dataclass(frozen=True)
class TlsProxy:
    address: str
    certs: Certificates


def haproxy_binary() -> str | None:
    return shutil.which("haproxy") or (
        "/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None
    )


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(
        ["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, f"openssl {' '.join(args)}:\n{done.stderr}"


def make_certificates(folder: Path) -> Certificates:
    """A CA, a server certificate for SERVER_NAME (and 127.0.0.1), a client certificate."""
    folder.mkdir(parents=True, exist_ok=True)
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=statecore test CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=folder,
    )  # fmt: skip
    leaves = {
        "server": ("serverAuth", f"subjectAltName=DNS:{SERVER_NAME},IP:127.0.0.1"),
        "client": ("clientAuth", "subjectAltName=DNS:statecore-worker"),
    }
    for name, (usage, san) in leaves.items():
        _openssl(
            "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.csr", "-subj", f"/CN={name}",
            cwd=folder,
        )  # fmt: skip
        (folder / f"{name}.ext").write_text(
            f"{san}\nextendedKeyUsage={usage}\nbasicConstraints=CA:FALSE\n"
            "keyUsage=digitalSignature,keyEncipherment\n"
        )
        _openssl(
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", "-extfile", f"{name}.ext",
            cwd=folder,
        )  # fmt: skip
    return Certificates(
        ca=folder / "ca.pem",
        server_cert=folder / "server.pem",
        server_key=folder / "server.key",
        client_cert=folder / "client.pem",
        client_key=folder / "client.key",
    )


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def tls_proxy(upstream: str, folder: Path, *, ready_within: float = 20.0) -> Iterator[TlsProxy]:
    """HAProxy on a free local port, terminating mTLS and relaying to ``upstream``."""
    binary = haproxy_binary()
    assert binary, "HAProxy is not installed (scripts/services.sh installs it)"
    certs = make_certificates(folder)
    bundle = folder / "server-bundle.pem"  # HAProxy takes the certificate and key in one file
    bundle.write_text(certs.server_cert.read_text() + certs.server_key.read_text())
    port = free_port()
    conf = folder / "haproxy.cfg"
    conf.write_text(
        "global\n"
        "    log stdout format raw local0 info\n"
        "defaults\n"
        "    mode tcp\n"
        "    log global\n"
        "    option tcplog\n"
        "    timeout connect 5s\n"
        "    timeout client 120s\n"
        "    timeout server 120s\n"
        "frontend temporal_tls\n"
        f"    bind 127.0.0.1:{port} ssl crt {bundle} ca-file {certs.ca} verify required alpn h2\n"
        "    default_backend temporal\n"
        "backend temporal\n"
        f"    server dev {upstream}\n"
    )
    with (folder / "haproxy.log").open("wb") as log:
        proc = subprocess.Popen(
            [binary, "-db", "-f", str(conf)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + ready_within
        while not _listening(port):
            assert proc.poll() is None, f"haproxy exited with {proc.returncode}: {_log(folder)}"
            assert time.monotonic() < deadline, f"haproxy not listening in {ready_within}s"
            time.sleep(0.1)
        yield TlsProxy(address=f"127.0.0.1:{port}", certs=certs)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _log(folder: Path) -> str:
    path = folder / "haproxy.log"
    return path.read_text(errors="replace")[-2000:] if path.exists() else "(no log)"
