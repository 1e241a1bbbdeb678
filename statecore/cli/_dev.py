"""``statecore dev``: an embedded Temporal dev server (with Web UI) and a worker, the same as
``statecore worker --dev``; it takes the worker's flags and environment variables."""

from __future__ import annotations

import argparse

from statecore.cli import _worker as worker
from statecore.cli._args import new_command
from statecore.cli._settings import Settings
from statecore.temporal import _settings as shared


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = new_command(
        commands,
        "dev",
        "run a Temporal dev server and a statecore worker (Ctrl-C stops both)",
    )
    shared.add_worker_options(p, dev_flag=False)
    p.set_defaults(run=dev)


async def dev(args: argparse.Namespace, settings: Settings) -> int:
    await worker.run(args, settings, dev=True)
    return 0
