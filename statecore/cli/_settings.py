"""Global options of the ``statecore`` command and the connections they describe.

The flags and the environment are read through ``statecore.temporal._settings`` (the worker's
reader too, so one environment serves both), after parsing and never at import time.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from statecore.cli._exits import UnreachableError, UsageError
from statecore.core._models import DEFAULT_NAMESPACE
from statecore.temporal import _settings as shared
from statecore.temporal._environment import Environment, flag_type

if TYPE_CHECKING:
    from temporalio.client import Client
    from temporalio.converter import DataConverter

    from statecore.store._base import StateStore
    from statecore.temporal._client import AgentSessionClient
    from statecore.temporal._connection import ConnectionConfig

T = TypeVar("T")

DEFAULT_TIMEOUT_SECONDS = 30.0


def add_global_options(
    parser: argparse.ArgumentParser, *, with_defaults: bool, skip: tuple[str, ...] = ()
) -> None:
    """The options every command takes, before or after the command name.

    The top-level parser holds the defaults; each command's parser repeats the options with
    suppressed defaults, so a value given after the command overrides one given before it,
    and an option not given after the command leaves the earlier value alone. ``skip`` names
    options a command defines itself with another meaning (``migrate --task-queue``). Options
    left unset (None) are resolved from the environment by ``Settings.from_args``."""

    def default(value: object) -> object:
        return value if with_defaults else argparse.SUPPRESS

    group = parser.add_argument_group("global options")
    shared.add_connection_options(group, suppress=not with_defaults)
    shared.add_state_options(group, suppress=not with_defaults, skip=skip)
    group.add_argument(
        "--state-namespace",
        default=default(None),
        metavar="NAME",
        help="statecore tenant namespace of the sessions (default 'default'; for import: "
        "the bundle's own)",
    )
    group.add_argument(
        "--timeout",
        type=flag_type(_positive_seconds),
        default=default(DEFAULT_TIMEOUT_SECONDS),
        metavar="SECONDS",
        help="how long to wait for a session's worker to answer (default 30)",
    )
    group.add_argument(
        "--payload-limit",
        type=flag_type(_payload_bytes),
        default=default(None),
        metavar="BYTES",
        help="the server's payload size limit; larger requests are refused before they are "
        "sent (default 2 MiB, Temporal's own)",
    )
    group.add_argument(
        "--context-window",
        type=flag_type(_tokens),
        default=default(None),
        metavar="TOKENS",
        help="the context window of the workers' model: a message that can never fit the "
        "session's context budget is refused before it is sent (without it, the session "
        "refuses it before accepting it)",
    )
    group.add_argument(
        "--json", action="store_true", default=default(False), help="machine-readable output"
    )
    group.add_argument(
        "--debug", action="store_true", default=default(False), help="show tracebacks of errors"
    )


def _positive_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number of seconds") from None
    if not 0 < seconds < float("inf"):
        raise ValueError(f"{text} must be more than 0 seconds")
    return seconds


def _count_of(unit: str) -> Callable[[str], int]:
    """A parser of a whole number of ``unit`` s (1 or more), for a flag's ``type``."""

    def parse(text: str) -> int:
        try:
            count = int(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a whole number of {unit}s") from None
        if count < 1:
            raise ValueError(f"{text} must be 1 {unit} or more")
        return count

    parse.__name__ = f"{unit}_count"
    return parse


_payload_bytes = _count_of("byte")
_tokens = _count_of("token")


@dataclass
class Settings:
    """The global options of one invocation, with the environment applied."""

    connection: ConnectionConfig
    task_queue: str
    database_url: str
    state_namespace: str | None
    encryption_keys: str | None
    timeout: float
    payload_limit: int | None
    context_window: int | None
    json: bool
    debug: bool
    env: Environment

    @classmethod
    def from_args(cls, args: argparse.Namespace, env: Environment) -> Settings:
        from dataclasses import replace

        # The connect limit follows --timeout, so a slow TLS handshake is not cut at 30 s
        # when the user asked for more.
        connection = replace(shared.connection_config(args, env), connect_timeout=args.timeout)
        return cls(
            connection=connection,
            # `migrate` has its own --task-queue (the target); the global one is unused there.
            task_queue=shared.task_queue(args, env),
            database_url=shared.database_url(args, env),
            state_namespace=args.state_namespace,
            encryption_keys=shared.encryption_keys(args, env),
            timeout=args.timeout,
            payload_limit=args.payload_limit,
            context_window=args.context_window,
            json=args.json,
            debug=args.debug,
            env=env,
        )

    @property
    def tenant(self) -> str:
        """The statecore namespace sessions are addressed in."""
        return self.state_namespace or DEFAULT_NAMESPACE

    # --- Temporal ------------------------------------------------------------------------------

    async def temporal(self) -> Client:
        """A Temporal client speaking statecore's payload format."""
        from statecore.observability._tracing import worker_runtime
        from statecore.temporal._connection import TemporalUnreachableError

        try:
            # The SDK core's own warnings (retries while the server restarts) would otherwise
            # be printed on stdout, in colour, among --json documents: they go to Python
            # logging (stderr) instead.
            return await self.connection.connect(
                data_converter=self.data_converter(), runtime=worker_runtime()
            )
        except TemporalUnreachableError as exc:
            raise UnreachableError(
                f"{exc.message}. Start one with `statecore dev`, or pass --address "
                "(and --tls, --api-key or --profile for a TLS cluster)"
            ) from exc

    def data_converter(self) -> DataConverter:
        """statecore's payload format, encrypted when a keyring is configured (the workers
        must use the same keyring, see docs/encryption.md)."""
        if not self.encryption_keys:
            from statecore.temporal._converter import statecore_data_converter

            return statecore_data_converter()
        try:
            from statecore.temporal._encryption import Keyring, encrypted_data_converter
        except ImportError as exc:
            raise UsageError(
                "--encryption-keys needs the encryption extra: pip install 'statecore[encryption]'"
            ) from exc
        try:
            keyring = Keyring.parse(self.encryption_keys)
        except ValueError as exc:
            raise UsageError(f"--encryption-keys: {exc}") from exc
        return encrypted_data_converter(keyring)

    async def sessions(self, *, retry_for: timedelta | None = None) -> AgentSessionClient:
        """A session client for ``--state-namespace`` that opens sessions on ``--task-queue``;
        ``retry_for`` bounds how long a turn is retried (the client's default if None)."""
        from statecore.temporal._client import AgentSessionClient

        client = await self.temporal()
        options: dict[str, Any] = {}
        if retry_for is not None:
            options["retry_for"] = retry_for
        if self.payload_limit is not None:
            options["payload_limit_bytes"] = self.payload_limit
        if self.context_window is not None:
            options["context_window"] = self.context_window
        return AgentSessionClient(
            client, task_queue=self.task_queue, namespace=self.tenant, **options
        )

    async def answer(self, work: Awaitable[T], what: str) -> T:
        """Wait for a session's worker to answer ``work`` (a query or an update)."""
        try:
            return await asyncio.wait_for(work, timeout=self.timeout)
        except TimeoutError as exc:
            raise UnreachableError(
                f"no answer to {what} within {self.timeout:g}s: is a statecore worker "
                "polling the session's task queue? (raise --timeout for slow operations)"
            ) from exc

    # --- the database --------------------------------------------------------------------------

    def sqlite_path(self) -> Path | None:
        """The file of a SQLite database URL; None for other databases and in-memory ones."""
        scheme, sep, rest = self.database_url.partition(":///")
        if not sep or not scheme.lower().startswith("sqlite"):
            return None
        path = rest.split("?", 1)[0]
        return None if path in ("", ":memory:") else Path(path)

    @asynccontextmanager
    async def store(self) -> AsyncIterator[StateStore]:
        """The statecore database, which must exist and be at the current schema."""
        from statecore.store import open_store

        path = self.sqlite_path()
        if path is not None and not path.exists():
            # Opening would create an empty file; say what is wrong instead.
            raise UnreachableError(
                f"no SQLite database at {path}; pass --database-url, or create it with "
                "`statecore db upgrade`"
            )
        store = await open_store(self.database_url)
        try:
            yield store
        finally:
            await store.close()
