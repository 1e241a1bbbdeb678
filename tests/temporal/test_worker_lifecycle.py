"""The worker process at its edges, as an operator meets them: a real ``statecore dev`` or
``python worker.py`` killed, stopped by signals mid-start, pointed at a database it cannot use.

- The dev server never outlives its worker (SIGKILL the worker: the server is gone); a
  leftover server of an earlier statecore is recognised by its pid file and replaced, saying
  so; a port held by another program is refused naming the port.
- ``--dev`` serves on the port ``TEMPORAL_ADDRESS`` names, and prints the next steps.
- A missing driver fails at once naming the extra; an unreachable database fails within
  seconds naming host:port and never the password, from the command and from the README's
  Python path (``StatecorePlugin`` + ``async with Worker``).
- SIGTERM and SIGINT end the worker within a bound at every point of start-up and shutdown.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from statecore.temporal._devserver import DevServer, free_port, port_is_free
from tests.worker_cli import REPO, base_env

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

STATECORE = str(Path(sys.executable).parent / "statecore")
#: What a dev worker logs once it polls (statecore.temporal._worker.next_steps).
NEXT_STEPS = "ready. Next steps:"
#: The bound on every stop: a worker that needs longer is hanging.
STOP_WITHIN = 15.0
SECRET = "s3cret-pw"


class Proc:
    """A command run from the repository root, its output in a file."""

    def __init__(self, argv: Sequence[str], log: Path, env: dict[str, str] | None = None):
        self.log = log
        with log.open("ab") as out:
            self.popen = subprocess.Popen(
                list(argv),
                cwd=REPO,
                env=env or base_env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, needle: str, within: float = 90.0) -> None:
        deadline = time.monotonic() + within
        while needle not in self.text():
            assert self.popen.poll() is None, f"exited {self.popen.returncode}:\n{self.text()}"
            assert time.monotonic() < deadline, f"no {needle!r} in {within}s:\n{self.text()}"
            time.sleep(0.1)

    def stopped_within(self, seconds: float) -> float:
        """Seconds until the process ended; fails (and kills it) past ``seconds``."""
        start = time.monotonic()
        try:
            self.popen.wait(timeout=seconds)
        except subprocess.TimeoutExpired as exc:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)
            raise AssertionError(f"still running {seconds}s on:\n{self.text()}") from exc
        return time.monotonic() - start

    def kill(self) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)


@contextmanager
def running(argv: Sequence[str], log: Path, env: dict[str, str] | None = None) -> Iterator[Proc]:
    proc = Proc(argv, log, env)
    try:
        yield proc
    finally:
        proc.kill()


def dev_argv(data: Path, *flags: str) -> list[str]:
    return [
        STATECORE,
        "dev",
        "--data-dir",
        str(data),
        "--database-url",
        f"sqlite+aiosqlite:///{data / 'statecore.db'}",
        *flags,
    ]


def gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.1)
    return False


def recorded_pid(data: Path) -> int:
    return int(json.loads((data / "temporal.pid").read_text())["pid"])


@contextmanager
def silent_listener() -> Iterator[int]:
    """A port that accepts connections and never says a word: a database that hangs."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]


# --- the dev server and its worker ------------------------------------------------------------


def test_dev_server_dies_with_its_sigkilled_worker_and_next_steps_are_printed(
    tmp_path: Path,
) -> None:
    port, ui_port = free_port(), free_port()
    data = tmp_path / "data"
    # The port comes from TEMPORAL_ADDRESS, as for every other command of the user.
    env = {**base_env(), "TEMPORAL_ADDRESS": f"127.0.0.1:{port}"}
    with running(dev_argv(data, "--ui-port", str(ui_port)), tmp_path / "dev.log", env) as dev:
        dev.wait_for(NEXT_STEPS)
        text = dev.text()
        server_pid = recorded_pid(data)
        assert f"--address 127.0.0.1:{port} chat my-agent my-session" in text
        assert f"temporal workflow list --address 127.0.0.1:{port}" in text
        assert f"http://127.0.0.1:{ui_port}/namespaces/default/workflows" in text
        assert f"Temporal data:      {data / 'temporal.db'}" in text
        assert f"sqlite+aiosqlite:///{data / 'statecore.db'}" in text
        assert ".venv/bin/statecore" in text or STATECORE in text
        # SIGKILL the worker alone (not its process group): the kernel takes its server.
        os.kill(dev.popen.pid, signal.SIGKILL)
        dev.popen.wait(10)
        assert gone(server_pid, 10), "the dev server outlived its SIGKILLed worker"
        deadline = time.monotonic() + 10  # the kernel closes a dead process's sockets soon
        while not (port_is_free(port) and port_is_free(ui_port)):
            assert time.monotonic() < deadline, "the dead server's ports are still held"
            time.sleep(0.2)


def test_dev_takes_its_port_from_a_local_address_and_names_a_remote_one_it_ignores() -> None:
    """The rule the first test exercises end to end (a local TEMPORAL_ADDRESS); a remote one
    is checked here, without starting a server on the default port 7233."""
    import argparse

    from statecore.temporal._environment import Environment
    from statecore.temporal._settings import dev_port

    def port_for(address: str | None, port: int | None = None) -> tuple[int, str | None]:
        args = argparse.Namespace(port=port, address=None)
        return dev_port(args, Environment.of({"TEMPORAL_ADDRESS": address or ""}), 7233)

    assert port_for("127.0.0.1:7300") == (7300, None)
    assert port_for("localhost:7301") == (7301, None)
    assert port_for(None) == (7233, None)
    assert port_for("temporal.example.com:7233", port=7400) == (7400, None)
    port, note = port_for("temporal.example.com:7233")
    assert port == 7233 and note is not None
    assert "ignores the address 'temporal.example.com:7233'" in note
    assert "need --address 127.0.0.1:7233" in note


def test_a_leftover_statecore_dev_server_is_stopped_and_replaced_saying_so(
    tmp_path: Path,
) -> None:
    port = free_port()
    data = tmp_path / "data"
    data.mkdir()
    # A server as an earlier statecore left it: running, recorded in the pid file, no parent.
    leftover = DevServer(port=port, ui_port=None, db_filename=str(data / "temporal.db"))
    old = subprocess.Popen(
        leftover.command(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        (data / "temporal.pid").write_text(json.dumps({"pid": old.pid, "port": port}))
        deadline = time.monotonic() + 60
        while port_is_free(port):
            assert time.monotonic() < deadline, "the leftover server never listened"
            time.sleep(0.2)
        argv = dev_argv(data, "--port", str(port), "--ui-port", "0")
        with running(argv, tmp_path / "dev.log") as dev:
            dev.wait_for(NEXT_STEPS)
            assert (
                f"port {port} is held by statecore's own dev server left over from an earlier "
                f"run (PID {old.pid}" in dev.text()
            )
            assert old.poll() is not None, "the leftover server is still running"
            assert recorded_pid(data) != old.pid
    finally:
        if old.poll() is None:
            old.kill()
        old.wait(10)


def test_a_port_held_by_another_program_is_refused_naming_it(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        argv = dev_argv(tmp_path / "data", "--port", str(port), "--ui-port", "0")
        with running(argv, tmp_path / "dev.log") as dev:
            dev.stopped_within(30)
    assert dev.popen.returncode != 0
    assert f"port {port} is already in use on 127.0.0.1 by another program" in dev.text()
    assert "--port / --ui-port" in dev.text()


def test_dev_with_encryption_keys_serves_the_codec_to_its_web_ui(tmp_path: Path) -> None:
    """The UI's own settings name the codec server statecore dev started, and that server
    decrypts a payload encrypted with the keys for the UI's origin."""
    import asyncio
    import re
    import urllib.request

    from google.protobuf import json_format
    from temporalio.api.common.v1 import Payloads
    from temporalio.contrib.pydantic import pydantic_data_converter

    from statecore import generate_key
    from statecore.temporal._encryption import EncryptionCodec, Keyring

    keys = f"dev:{generate_key()}"
    port, ui_port = free_port(), free_port()
    argv = dev_argv(tmp_path / "data", "--port", str(port), "--ui-port", str(ui_port))
    env = {**base_env(), "STATECORE_ENCRYPTION_KEYS": keys}
    with running(argv, tmp_path / "dev.log", env) as dev:
        dev.wait_for(NEXT_STEPS)
        found = re.search(r"codec server: +(http://127\.0\.0\.1:\d+)", dev.text())
        assert found, dev.text()
        codec_url = found.group(1)
        assert f"--codec-endpoint {codec_url}" in dev.text()
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/api/v1/settings") as page:
            settings = json.loads(page.read())
        assert settings["Codec"]["Endpoint"] == codec_url
        plain = pydantic_data_converter.payload_converter.to_payloads(["a secret"])
        encrypted = asyncio.run(EncryptionCodec(Keyring.parse(keys)).encode(plain))
        request = urllib.request.Request(
            f"{codec_url}/decode",
            data=json.dumps(json_format.MessageToDict(Payloads(payloads=encrypted))).encode(),
            headers={"Content-Type": "application/json", "Origin": f"http://127.0.0.1:{ui_port}"},
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            decoded = json_format.Parse(answer.read(), Payloads())
        values = pydantic_data_converter.payload_converter.from_payloads(list(decoded.payloads))
        assert values == ["a secret"]
        dev.popen.send_signal(signal.SIGTERM)
        dev.stopped_within(STOP_WITHIN)
    assert dev.popen.returncode == 0


# --- a database the worker cannot use ---------------------------------------------------------

#: Run a command as if the postgres extra were not installed (asyncpg cannot be imported).
WITHOUT_ASYNCPG = "import sys; sys.modules['asyncpg'] = None; "


def test_a_missing_driver_fails_at_once_naming_the_extra(tmp_path: Path) -> None:
    url = f"postgresql+asyncpg://app:{SECRET}@127.0.0.1:5432/agents"
    code = WITHOUT_ASYNCPG + "import runpy; sys.argv = ['worker.py', *sys.argv[1:]]; "
    code += "runpy.run_path('worker.py', run_name='__main__')"
    argv = [sys.executable, "-c", code, "--address", "127.0.0.1:1", "--database-url", url]
    with running(argv, tmp_path / "worker.log") as worker:
        took = worker.stopped_within(STOP_WITHIN)
    assert worker.popen.returncode == 1
    assert "need the asyncpg driver, which is not installed" in worker.text()
    assert "pip install 'statecore[postgres]'" in worker.text()
    assert SECRET not in worker.text()
    assert took < 10, f"took {took:.1f}s"


def test_an_unreachable_database_fails_within_seconds_naming_its_address(
    tmp_path: Path, dev_server: DevServer
) -> None:
    with silent_listener() as db_port:
        url = f"postgresql+asyncpg://app:{SECRET}@127.0.0.1:{db_port}/agents"
        argv = [sys.executable, "worker.py", "--address", dev_server.address]
        argv += ["--task-queue", f"unreachable-{db_port}", "--database-url", url]
        with running(argv, tmp_path / "worker.log") as worker:
            took = worker.stopped_within(40)
    assert worker.popen.returncode == 5, worker.text()
    assert f"cannot reach the database at 127.0.0.1:{db_port}/agents" in worker.text()
    assert SECRET not in worker.text()
    assert took < 30, f"took {took:.1f}s"


README_PATH = """
import asyncio, sys
from temporalio.client import Client
from temporalio.worker import Worker
from statecore import StatecorePlugin

async def main() -> None:
    plugin = StatecorePlugin(database_url=sys.argv[2])
    client = await Client.connect(sys.argv[1], plugins=[plugin])
    async with Worker(client, task_queue=sys.argv[3]):
        await asyncio.sleep(3600)

asyncio.run(main())
"""


def test_the_readme_python_path_fails_instead_of_hanging(
    tmp_path: Path, dev_server: DevServer
) -> None:
    """The README's snippet: a missing driver fails at ``StatecorePlugin(...)``; an
    unreachable database ends ``async with Worker(...)`` with the error (temporalio alone
    would wait forever for a worker that never started)."""
    url = f"postgresql+asyncpg://app:{SECRET}@127.0.0.1:5432/agents"
    argv = [sys.executable, "-c", WITHOUT_ASYNCPG + README_PATH, dev_server.address, url, "q"]
    with running(argv, tmp_path / "missing.log") as missing:
        missing.stopped_within(STOP_WITHIN)
    assert "DriverMissingError" in missing.text()
    assert "pip install 'statecore[postgres]'" in missing.text()
    with silent_listener() as db_port:
        url = f"postgresql+asyncpg://app:{SECRET}@127.0.0.1:{db_port}/agents"
        argv = [sys.executable, "-c", README_PATH, dev_server.address, url, f"readme-{db_port}"]
        with running(argv, tmp_path / "unreachable.log") as unreachable:
            unreachable.stopped_within(40)
    assert "DatabaseUnavailableError" in unreachable.text()
    assert f"cannot reach the database at 127.0.0.1:{db_port}/agents" in unreachable.text()
    assert SECRET not in unreachable.text()


# --- signals at every point -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("point", "sig"),
    [
        ("dev server starting", signal.SIGINT),
        ("connected to Temporal", signal.SIGTERM),
        (NEXT_STEPS, signal.SIGTERM),
    ],
)
def test_a_dev_worker_stops_on_a_signal_at_every_point_of_start_up(
    tmp_path: Path, point: str, sig: signal.Signals
) -> None:
    data = tmp_path / "data"
    argv = dev_argv(data, "--port", str(free_port()), "--ui-port", "0")
    with running(argv, tmp_path / "dev.log") as dev:
        if point == "dev server starting":
            deadline = time.monotonic() + 30
            while not (data / "temporal.pid").exists():
                assert time.monotonic() < deadline, dev.text()
                time.sleep(0.02)
        else:
            dev.wait_for(point)
        server_pid = recorded_pid(data)
        dev.popen.send_signal(sig)
        dev.stopped_within(STOP_WITHIN)
    assert dev.popen.returncode == 0, dev.text()
    assert "Traceback" not in dev.text()
    assert gone(server_pid, 5), f"dev server left running after {sig.name} at {point!r}"


def test_a_worker_stops_on_sigterm_while_its_database_hangs_and_a_second_signal_is_final(
    tmp_path: Path, dev_server: DevServer
) -> None:
    with silent_listener() as db_port:
        url = f"postgresql+asyncpg://app@127.0.0.1:{db_port}/agents"
        argv = [sys.executable, "worker.py", "--address", dev_server.address]
        argv += ["--task-queue", f"hang-{db_port}", "--database-url", url]
        with running(argv, tmp_path / "worker.log") as worker:
            worker.wait_for("statecore worker on task queue")  # opening the store now
            worker.popen.send_signal(signal.SIGTERM)
            took = worker.stopped_within(STOP_WITHIN)
    assert took < 8, f"took {took:.1f}s to stop:\n{worker.text()}"


def test_a_second_signal_during_shutdown_ends_the_worker(tmp_path: Path) -> None:
    data = tmp_path / "data"
    argv = dev_argv(data, "--port", str(free_port()), "--ui-port", "0")
    with running(argv, tmp_path / "dev.log") as dev:
        dev.wait_for(NEXT_STEPS)
        server_pid = recorded_pid(data)
        dev.popen.send_signal(signal.SIGTERM)
        time.sleep(0.05)
        dev.popen.send_signal(signal.SIGTERM)
        dev.stopped_within(STOP_WITHIN)
    assert "Traceback" not in dev.text()
    assert gone(server_pid, 5)
