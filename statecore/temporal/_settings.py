"""The one reader of statecore's configuration, for the worker, the ``statecore`` command and
the codec server.

Every environment variable is read here, through ``Environment``, under one rule: an empty
variable counts as unset (compose's ``${X:-}`` and ``.env`` files hand over ""). A flag
overrides its variable, a variable overrides the default. A value that does not parse is a
``SettingError`` naming the flag or variable and what it accepts, never a traceback.

Nothing here imports temporalio: the codec server and ``statecore --help`` stay light.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from statecore.contract._session import DEFAULT_TASK_QUEUE
from statecore.temporal._environment import (
    DEFAULT_DATA_DIR,
    DEFAULT_DATABASE_URL,
    LOG_LEVELS,
    Environment,
    LogFormat,
    flag_type,
    parse_bool,
    parse_log_format,
    parse_log_level,
    parse_port,
    pick,
)

if TYPE_CHECKING:
    from statecore.temporal._connection import ConnectionConfig
    from statecore.temporal._worker_config import WorkerConfig


def _text(value: str) -> str:
    return value


# --- the connection to Temporal (every entry point) --------------------------------------------


def add_connection_options(group: argparse._ActionsContainer, *, suppress: bool) -> None:
    """The ``temporal`` CLI's connection flags. ``suppress``: a command's copy of the global
    options, which leaves a value given before the command alone (see statecore.cli)."""
    default = argparse.SUPPRESS if suppress else None
    group.add_argument(
        "--address",
        default=default,
        help="Temporal frontend host:port (env TEMPORAL_ADDRESS; default localhost:7233)",
    )
    group.add_argument(
        "--namespace",
        default=default,
        help="Temporal namespace (env TEMPORAL_NAMESPACE; default 'default')",
    )
    group.add_argument(
        "--api-key",
        default=default,
        metavar="KEY",
        help="API key, e.g. Temporal Cloud's; turns TLS on (env TEMPORAL_API_KEY; prefer it: "
        "flags show in the process list)",
    )
    # A switch, not "--tls BOOL": an optional value would swallow the command after it.
    group.add_argument(
        "--tls",
        action=argparse.BooleanOptionalAction,
        default=default,
        help="connect with TLS, or not (env TEMPORAL_TLS=true/false); on by itself with an API "
        "key or a TLS file",
    )
    group.add_argument(
        "--tls-cert-path",
        default=default,
        metavar="PATH",
        help="client certificate for mTLS (env TEMPORAL_TLS_CLIENT_CERT_PATH)",
    )
    group.add_argument(
        "--tls-key-path",
        default=default,
        metavar="PATH",
        help="client private key for mTLS (env TEMPORAL_TLS_CLIENT_KEY_PATH)",
    )
    group.add_argument(
        "--tls-ca-path",
        default=default,
        metavar="PATH",
        help="CA certificate the server's is checked against (env "
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH; default: the system's)",
    )
    group.add_argument(
        "--tls-server-name",
        default=default,
        metavar="NAME",
        help="server name to verify, when not the address's host (env TEMPORAL_TLS_SERVER_NAME)",
    )
    group.add_argument(
        "--profile",
        default=default,
        help="profile of the temporal.toml file (env TEMPORAL_PROFILE; default 'default')",
    )
    group.add_argument(
        "--config-file",
        default=default,
        metavar="PATH",
        help="the temporal.toml file (env TEMPORAL_CONFIG_FILE; default "
        "~/.config/temporalio/temporal.toml)",
    )


def connection_config(args: argparse.Namespace, env: Environment) -> ConnectionConfig:
    """The connection the flags in ``args`` and the environment describe (the temporal.toml
    profile and ``TEMPORAL_*`` variables are applied when it is resolved)."""
    from statecore.temporal._connection import ConnectionConfig

    return ConnectionConfig(
        address=getattr(args, "address", None),
        namespace=getattr(args, "namespace", None),
        api_key=getattr(args, "api_key", None),
        tls=getattr(args, "tls", None),
        tls_cert_path=getattr(args, "tls_cert_path", None),
        tls_key_path=getattr(args, "tls_key_path", None),
        tls_ca_path=getattr(args, "tls_ca_path", None),
        tls_server_name=getattr(args, "tls_server_name", None),
        profile=getattr(args, "profile", None),
        config_file=getattr(args, "config_file", None),
        environ=env.temporal(),
    )


# --- statecore's own settings, shared by the worker and the command ----------------------------


def add_state_options(
    group: argparse._ActionsContainer, *, suppress: bool, skip: tuple[str, ...] = ()
) -> None:
    """Task queue, database and keyring: what the worker and the command must agree on."""
    default = argparse.SUPPRESS if suppress else None
    if "--task-queue" not in skip:
        group.add_argument(
            "--task-queue",
            default=default,
            help="task queue sessions run on (env STATECORE_TASK_QUEUE; default statecore)",
        )
    group.add_argument(
        "--database-url",
        default=default,
        help=f"statecore's database (env STATECORE_DATABASE_URL; default {DEFAULT_DATABASE_URL})",
    )
    group.add_argument(
        "--encryption-keys",
        default=default,
        metavar="ID:KEY,...",
        help="payload keyring, AES-256-GCM, newest last (env STATECORE_ENCRYPTION_KEYS; "
        "prefer it: flags show in the process list)",
    )


def task_queue(args: argparse.Namespace, env: Environment) -> str:
    return pick(
        getattr(args, "task_queue", None), env, "STATECORE_TASK_QUEUE", _text, DEFAULT_TASK_QUEUE
    )


def database_url(args: argparse.Namespace, env: Environment) -> str:
    return pick(
        getattr(args, "database_url", None),
        env,
        "STATECORE_DATABASE_URL",
        _text,
        DEFAULT_DATABASE_URL,
    )


def encryption_keys(args: argparse.Namespace, env: Environment) -> str | None:
    flag = getattr(args, "encryption_keys", None)
    return flag if flag is not None else env.text("STATECORE_ENCRYPTION_KEYS")


# --- the worker --------------------------------------------------------------------------------


def add_worker_options(parser: argparse.ArgumentParser, *, dev_flag: bool = True) -> None:
    """The worker's own flags (``statecore worker``; ``statecore dev`` without ``--dev``)."""
    if dev_flag:
        parser.add_argument(
            "--dev", action="store_true", help="start an embedded Temporal dev server + Web UI"
        )
    parser.add_argument(
        "--model", help="'offline' (default) or 'openai:<model name>' (env STATECORE_MODEL)"
    )
    parser.add_argument(
        "--model-base-url",
        help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 (env "
        "STATECORE_MODEL_BASE_URL); its key: env STATECORE_MODEL_API_KEY or OPENAI_API_KEY",
    )
    parser.add_argument(
        "--encoding", help="tiktoken encoding (env STATECORE_ENCODING; default cl100k_base)"
    )
    parser.add_argument("--no-migrate", action="store_true", help="do not apply migrations")
    parser.add_argument("--port", type=flag_type(parse_port), help="dev server gRPC port (7233)")
    parser.add_argument(
        "--ui-port", type=flag_type(parse_port), help="dev server Web UI port (8233; 0: none)"
    )
    parser.add_argument("--data-dir", help=f"where the dev server's files go ({DEFAULT_DATA_DIR})")
    parser.add_argument(
        "--log-level",
        type=flag_type(parse_log_level),
        help=f"{', '.join(LOG_LEVELS)} (env STATECORE_LOG_LEVEL; default INFO)",
    )
    parser.add_argument(
        "--log-format",
        type=flag_type(parse_log_format),
        help="text, or json: one object per line naming session, agent and turn "
        "(env STATECORE_LOG_FORMAT; default text)",
    )
    parser.add_argument(
        "--metrics-port",
        type=flag_type(parse_port),
        help="serve Prometheus metrics on this port (env STATECORE_METRICS_PORT; default: off)",
    )
    parser.add_argument(
        "--metrics-host",
        help="address the metrics endpoint binds, 0.0.0.0 in a container "
        "(env STATECORE_METRICS_HOST; default 127.0.0.1)",
    )
    parser.add_argument(
        "--otel",
        "--tracing",
        action="store_const",
        const=True,
        help="OpenTelemetry tracing, needs the otel extra (env STATECORE_OTEL)",
    )
    parser.add_argument(
        "--otel-endpoint",
        help="OTLP/gRPC collector, e.g. http://collector:4317 (env OTEL_EXPORTER_OTLP_ENDPOINT; "
        "default: spans to the console)",
    )


#: Host names a ``--dev`` server can listen on: an address naming one of them is its own.
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]")


def dev_port(args: argparse.Namespace, env: Environment, default: int) -> tuple[int, str | None]:
    """The port ``--dev`` starts its server on, and a note when an address was ignored.

    ``--port`` wins; else a local ``--address`` or ``TEMPORAL_ADDRESS`` names it, so the server
    and every command reading that variable meet on one port. A remote address cannot be
    served by an embedded server: it is ignored, and the note says so."""
    if args.port is not None:
        return args.port, None
    address = getattr(args, "address", None) or env.text("TEMPORAL_ADDRESS")
    if not address:
        return default, None
    host, _, port = address.rpartition(":")
    if host.lower() in LOCAL_HOSTS and port.isdigit() and 0 < int(port) < 65536:
        return int(port), None
    return default, (
        f"--dev runs its own Temporal server on 127.0.0.1:{default} and ignores the address "
        f"{address!r} (from --address or TEMPORAL_ADDRESS: not a local host:port); commands "
        f"reaching this server need --address 127.0.0.1:{default}"
    )


@dataclass(frozen=True)
class LogSettings:
    level: str
    format: LogFormat


def log_settings(args: argparse.Namespace, env: Environment) -> LogSettings:
    return LogSettings(
        level=pick(args.log_level, env, "STATECORE_LOG_LEVEL", parse_log_level, "INFO"),
        format=pick(
            args.log_format, env, "STATECORE_LOG_FORMAT", parse_log_format, cast(LogFormat, "text")
        ),
    )


def worker_config(args: argparse.Namespace, env: Environment, *, dev: bool) -> WorkerConfig:
    """The worker ``args`` (global options and ``add_worker_options``) and ``env`` describe."""
    from statecore.temporal._worker_config import WorkerConfig

    defaults = WorkerConfig()
    return WorkerConfig(
        connection=connection_config(args, env),
        task_queue=task_queue(args, env),
        database_url=database_url(args, env),
        model=pick(args.model, env, "STATECORE_MODEL", _text, defaults.model),
        model_base_url=args.model_base_url or env.text("STATECORE_MODEL_BASE_URL"),
        model_api_key=env.text("STATECORE_MODEL_API_KEY") or env.text("OPENAI_API_KEY"),
        encoding=pick(args.encoding, env, "STATECORE_ENCODING", _text, defaults.encoding),
        migrate=not args.no_migrate,
        encryption_keys=encryption_keys(args, env),
        dev=dev,
        dev_port=dev_port(args, env, defaults.dev_port)[0] if dev else defaults.dev_port,
        dev_ui_port=defaults.dev_ui_port if args.ui_port is None else args.ui_port,
        data_dir=args.data_dir or defaults.data_dir,
        metrics_port=pick(args.metrics_port, env, "STATECORE_METRICS_PORT", parse_port, None),
        metrics_host=pick(
            args.metrics_host, env, "STATECORE_METRICS_HOST", _text, defaults.metrics_host
        ),
        otel=pick(args.otel, env, "STATECORE_OTEL", parse_bool, False),
        otel_endpoint=args.otel_endpoint or env.text("OTEL_EXPORTER_OTLP_ENDPOINT"),
    )
