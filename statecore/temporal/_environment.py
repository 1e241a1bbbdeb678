"""Reading one setting: statecore's environment variables and value parsers.

Every environment variable is read through ``Environment``, under one rule: an empty variable
counts as unset (compose's ``${X:-}`` and ``.env`` files hand over ""). A value that does not
parse is a ``SettingError`` naming the variable or flag and what it accepts, never a traceback.

This module is the bottom of the configuration: the connection, the worker, the codec server
and the option readers in ``settings`` build on it, and it imports none of them.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, TypeVar, cast

from statecore.core._errors import InvalidInputError

T = TypeVar("T")

DEFAULT_DATA_DIR = ".statecore"
DEFAULT_DATABASE_URL = f"sqlite+aiosqlite:///{DEFAULT_DATA_DIR}/statecore.db"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")

#: The variables statecore reads itself. Those of ``temporalio.envconfig`` (``TEMPORAL_*``,
#: the way the ``temporal`` CLI connects) are handed to it under the same empty-means-unset rule.
STATECORE_VARIABLES = frozenset(
    {
        "STATECORE_TASK_QUEUE",
        "STATECORE_DATABASE_URL",
        "STATECORE_MODEL",
        "STATECORE_MODEL_BASE_URL",
        "STATECORE_MODEL_API_KEY",
        "OPENAI_API_KEY",
        "STATECORE_ENCODING",
        "STATECORE_ENCRYPTION_KEYS",
        "STATECORE_CODEC_TOKEN",
        "STATECORE_LOG_LEVEL",
        "STATECORE_LOG_FORMAT",
        "STATECORE_METRICS_PORT",
        "STATECORE_METRICS_HOST",
        "STATECORE_OTEL",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    }
)
TEMPORAL_VARIABLES = frozenset(
    {
        "TEMPORAL_ADDRESS",
        "TEMPORAL_NAMESPACE",
        "TEMPORAL_API_KEY",
        "TEMPORAL_TLS",
        "TEMPORAL_TLS_CLIENT_CERT_PATH",
        "TEMPORAL_TLS_CLIENT_CERT_DATA",
        "TEMPORAL_TLS_CLIENT_KEY_PATH",
        "TEMPORAL_TLS_CLIENT_KEY_DATA",
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
        "TEMPORAL_TLS_SERVER_CA_CERT_DATA",
        "TEMPORAL_TLS_SERVER_NAME",
        "TEMPORAL_PROFILE",
        "TEMPORAL_CONFIG_FILE",
    }
)


class SettingError(InvalidInputError):
    """A flag, environment variable or profile value statecore cannot use as given."""

    code = "InvalidSetting"


# --- parsing one value -------------------------------------------------------------------------
# Each parser takes the text and raises ValueError saying what is allowed; ``Environment`` and
# the flags wrap that with the variable's or the flag's name.


def parse_port(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a port number (0-65535)") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"{number} is not a port number (0-65535)")
    return number


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{text!r} is not a boolean (true/false, 1/0, yes/no, on/off)")


def parse_log_level(text: str) -> str:
    level = text.strip().upper()
    if level not in LOG_LEVELS:
        raise ValueError(f"{text!r} is not a log level ({', '.join(LOG_LEVELS)})")
    return level


def parse_log_format(text: str) -> LogFormat:
    if text not in LOG_FORMATS:
        raise ValueError(f"{text!r} is not a log format ({', '.join(LOG_FORMATS)})")
    return cast(LogFormat, text)


def flag_type(parse: Callable[[str], T]) -> Callable[[str], T]:
    """``parse`` as an argparse ``type=``: a bad flag value is a one-line usage error."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__.removeprefix("parse_")
    return convert


# --- the environment ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Environment:
    """Environment variables under statecore's one rule: an empty value is no value."""

    values: Mapping[str, str]

    @classmethod
    def of(cls, variables: Mapping[str, str]) -> Environment:
        return cls({name: value for name, value in variables.items() if value != ""})

    @classmethod
    def from_process(cls) -> Environment:
        """The process's environment: the only place statecore reads ``os.environ``."""
        return cls.of(os.environ)

    def text(self, name: str) -> str | None:
        return self.values.get(name)

    def parsed(self, name: str, parse: Callable[[str], T]) -> T | None:
        raw = self.values.get(name)
        if raw is None:
            return None
        try:
            return parse(raw)
        except ValueError as exc:
            raise SettingError(f"environment variable {name}: {exc}") from None

    def temporal(self) -> dict[str, str]:
        """The variables ``temporalio.envconfig`` reads: ``TEMPORAL_*``."""
        return {name: value for name, value in self.values.items() if name.startswith("TEMPORAL_")}


def pick(flag: T | None, env: Environment, name: str, parse: Callable[[str], T], default: T) -> T:
    """The flag if given, else the variable ``name`` parsed, else ``default``."""
    if flag is not None:
        return flag
    from_env = env.parsed(name, parse)
    return default if from_env is None else from_env
