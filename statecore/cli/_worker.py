"""``statecore worker``: run a statecore worker, on a Temporal cluster or (``--dev``) on an
embedded dev server. ``worker.py`` and the container image run this command.

It connects the way the ``temporal`` CLI does (a temporal.toml profile, ``TEMPORAL_*``
variables, the connection flags) and runs until SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse

from statecore.cli._args import new_command
from statecore.cli._settings import Settings
from statecore.temporal import _settings as shared

DESCRIPTION = """\
Run a statecore worker for AgentSession workflows until SIGINT or SIGTERM.

  statecore worker --dev                              # embedded dev server + Web UI, SQLite
  statecore worker --database-url postgresql+asyncpg://app@db/agents
  statecore worker --profile cloud                    # ~/.config/temporalio/temporal.toml
  TEMPORAL_ADDRESS=ns.acct.tmprl.cloud:7233 TEMPORAL_NAMESPACE=ns.acct \\
    TEMPORAL_API_KEY=... statecore worker              # Temporal Cloud with an API key

Every flag has an environment variable (named in its help); an empty variable is unset.
"""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = new_command(
        commands, "worker", "run a statecore worker (SIGTERM stops it)", description=DESCRIPTION
    )
    shared.add_worker_options(p)
    p.set_defaults(run=worker)


async def worker(args: argparse.Namespace, settings: Settings) -> int:
    await run(args, settings, dev=args.dev)
    return 0


async def run(args: argparse.Namespace, settings: Settings, *, dev: bool) -> None:
    """Configure logging, then run the worker the options describe until it is stopped."""
    import logging

    from statecore.observability._logs import configure_logging
    from statecore.temporal._worker import run_worker

    logs = shared.log_settings(args, settings.env)
    config = shared.worker_config(args, settings.env, dev=dev)
    configure_logging(logs.level, logs.format)
    logging.getLogger("alembic").setLevel(logging.WARNING)  # migration chatter at start
    if dev:
        _, ignored = shared.dev_port(args, settings.env, config.dev_port)
        if ignored:
            logging.getLogger("statecore.worker").warning("%s", ignored)
    await run_worker(config)  # until SIGINT or SIGTERM
