"""How statecore reaches Temporal: the way the ``temporal`` CLI does.

A ``ConnectionConfig`` is resolved through ``temporalio.envconfig``, each layer overriding the
one before: a profile of a ``temporal.toml`` file, the ``TEMPORAL_*`` environment variables,
then the fields set on it (the flags). The result is ``Client.connect``'s keyword arguments,
so a TLS cluster, mTLS and Temporal Cloud's API keys work wherever statecore connects.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.client import Client, Interceptor, Plugin
from temporalio.converter import DataConverter
from temporalio.envconfig import ClientConfigProfile, ClientConfigTLS, ClientConnectConfig
from temporalio.runtime import Runtime

from statecore.core.errors import StatecoreError
from statecore.temporal.settings import Environment, SettingError, parse_bool

DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"
#: How long ``connect`` waits for the frontend (TLS handshake included) before giving up.
DEFAULT_CONNECT_TIMEOUT_SECONDS = 30.0


class TemporalUnreachableError(StatecoreError):
    """Temporal did not accept a connection: not listening, TLS refused, or no answer in time."""

    code = "Unreachable"


@dataclass(frozen=True)
class ConnectionConfig:
    """Where Temporal is and how to talk to it; every field left None comes from the profile
    or the environment, as with the ``temporal`` CLI (``--address``, ``--namespace``,
    ``--api-key``, ``--tls``, ``--tls-cert-path``, ``--tls-key-path``, ``--tls-ca-path``,
    ``--tls-server-name``, ``--profile``, ``--config-file``).

    ``environ`` is the environment resolved against (``TEMPORAL_*``; an empty value counts as
    unset); None means the process's environment at the time of resolving, ``{}`` none at all.
    Without a file named here or by ``TEMPORAL_CONFIG_FILE``, temporalio looks for the default
    ``temporal.toml`` under the process's own ``XDG_CONFIG_HOME`` or ``HOME``, as the
    ``temporal`` CLI does.
    """

    address: str | None = None
    namespace: str | None = None
    api_key: str | None = field(default=None, repr=False)
    tls: bool | None = None
    tls_cert_path: str | None = None
    tls_key_path: str | None = None
    tls_ca_path: str | None = None
    tls_server_name: str | None = None
    profile: str | None = None
    config_file: str | None = None
    environ: Mapping[str, str] | None = field(default=None, repr=False)
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_SECONDS

    def __post_init__(self) -> None:
        if not self.connect_timeout > 0:
            raise ValueError(f"connect_timeout must be positive, got {self.connect_timeout!r}")

    def resolve(self) -> ClientConnectConfig:
        """``Client.connect`` keyword arguments (``target_host``, ``namespace``, ``api_key``,
        ``tls``, ``rpc_metadata``), TLS files read. SettingError when the profile, a file or a
        variable cannot be used."""
        profile = self._apply_fields(self._load_profile())
        try:
            options = profile.to_client_connect_config()
        except OSError as exc:
            raise SettingError(
                f"cannot read a TLS file for Temporal: {exc.filename}: {exc.strerror}"
            ) from exc
        options.setdefault("target_host", DEFAULT_ADDRESS)
        options.setdefault("namespace", DEFAULT_NAMESPACE)
        return options

    def describe(self) -> str:
        """``host:port (namespace N, TLS)`` for messages; never the API key."""
        return _where(self.resolve())

    async def connect(
        self,
        *,
        plugins: Sequence[Plugin] = (),
        interceptors: Sequence[Interceptor] = (),
        runtime: Runtime | None = None,
        data_converter: DataConverter | None = None,
    ) -> Client:
        """A connected client, within ``connect_timeout``; TemporalUnreachableError naming
        the address otherwise."""
        options = self.resolve()
        where = _where(options)
        connecting = Client.connect(
            options["target_host"],
            namespace=options["namespace"],
            api_key=options.get("api_key"),
            tls=options.get("tls", False),
            rpc_metadata=options.get("rpc_metadata", {}),
            plugins=list(plugins),
            interceptors=list(interceptors),
            runtime=runtime,
            data_converter=data_converter or DataConverter.default,
        )
        try:
            return await asyncio.wait_for(connecting, timeout=self.connect_timeout)
        except TimeoutError as exc:
            raise TemporalUnreachableError(
                f"cannot reach Temporal at {where}: no answer within {self.connect_timeout:g}s"
            ) from exc
        except RuntimeError as exc:
            # "Failed client connect: Server connection error: tonic::transport::Error(...)"
            reason = " ".join(str(exc).split())[:400]
            raise TemporalUnreachableError(f"cannot reach Temporal at {where}: {reason}") from exc

    # --- resolution ----------------------------------------------------------------------------

    def _environment(self) -> Environment:
        if self.environ is None:
            return Environment.from_process()
        return Environment.of(self.environ)

    def _load_profile(self) -> ClientConfigProfile:
        env = self._environment()
        # envconfig takes any TEMPORAL_TLS value but true/false as "on"; say so instead.
        env.parsed("TEMPORAL_TLS", parse_bool)
        config_file = self.config_file or env.text("TEMPORAL_CONFIG_FILE")
        if config_file is not None and not Path(config_file).is_file():
            # envconfig would carry on with an empty profile; a named file must exist.
            raise SettingError(f"no Temporal config file at {config_file}")
        try:
            return ClientConfigProfile.load(
                self.profile,
                config_source=Path(config_file) if config_file else None,
                override_env_vars=dict(env.temporal()),
            )
        except RuntimeError as exc:  # envconfig's ConfigError: unknown profile, bad TOML
            where = f" ({config_file})" if config_file else ""
            text = " ".join(str(exc).split())
            raise SettingError(f"Temporal connection profile{where}: {text}") from exc

    def _apply_fields(self, profile: ClientConfigProfile) -> ClientConfigProfile:
        tls_files = {
            "--tls-cert-path": self.tls_cert_path,
            "--tls-key-path": self.tls_key_path,
            "--tls-ca-path": self.tls_ca_path,
            "--tls-server-name": self.tls_server_name,
        }
        given = [flag for flag, value in tls_files.items() if value is not None]
        if self.tls is False and given:
            raise SettingError(f"{', '.join(given)} given with TLS turned off (--no-tls)")
        tls = profile.tls
        if given or self.tls is not None:
            base = tls or ClientConfigTLS()
            tls = ClientConfigTLS(
                disabled=(not self.tls) if self.tls is not None else base.disabled,
                server_name=self.tls_server_name or base.server_name,
                server_root_ca_cert=_path(self.tls_ca_path) or base.server_root_ca_cert,
                client_cert=_path(self.tls_cert_path) or base.client_cert,
                client_private_key=_path(self.tls_key_path) or base.client_private_key,
            )
        if tls is not None and (tls.client_cert is None) != (tls.client_private_key is None):
            raise SettingError(
                "mTLS needs both a client certificate and its key "
                "(--tls-cert-path and --tls-key-path, or the TEMPORAL_TLS_CLIENT_* variables)"
            )
        return ClientConfigProfile(
            address=self.address or profile.address,
            namespace=self.namespace or profile.namespace,
            api_key=self.api_key or profile.api_key,
            tls=tls,
            grpc_meta=profile.grpc_meta,
        )


def _where(options: ClientConnectConfig) -> str:
    how = "TLS" if options.get("tls", False) is not False else "plaintext"
    if "api_key" in options:
        how += ", API key"
    return f"{options['target_host']} (namespace {options['namespace']}, {how})"


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None
