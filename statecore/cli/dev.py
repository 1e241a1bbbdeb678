"""``statecore dev``: an embedded Temporal dev server (with Web UI) and a worker, like
``python worker.py --dev``. The flags and environment variables are the worker's."""

from __future__ import annotations

import argparse
import logging
import os

from statecore.cli.args import new_command
from statecore.cli.settings import Settings


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    env = os.environ
    p = new_command(
        commands,
        "dev",
        "run a Temporal dev server and a statecore worker (Ctrl-C stops both)",
    )
    # Defaults left as None come from WorkerConfig, imported only when the command runs.
    p.add_argument("--port", type=int, help="dev server gRPC port (default 7233)")
    p.add_argument("--ui-port", type=int, help="Web UI port (default 8233; 0: no Web UI)")
    p.add_argument("--data-dir", help="where the dev server's files go (default .statecore)")
    p.add_argument(
        "--model",
        default=env.get("STATECORE_MODEL"),
        help="'offline' (default) or 'openai:<model name>' (env STATECORE_MODEL)",
    )
    p.add_argument("--model-base-url", default=env.get("STATECORE_MODEL_BASE_URL"))
    p.add_argument("--encoding", default=env.get("STATECORE_ENCODING"))
    p.add_argument("--no-migrate", action="store_true", help="do not apply database migrations")
    p.add_argument(
        "--log-level",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        default=env.get("STATECORE_LOG_LEVEL", "INFO").upper(),
    )
    p.set_defaults(run=dev)


async def dev(args: argparse.Namespace, settings: Settings) -> int:
    from statecore.temporal.worker import WorkerConfig, run_worker

    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    defaults = WorkerConfig()
    config = WorkerConfig(
        temporal_namespace=settings.namespace,
        task_queue=settings.task_queue,
        database_url=settings.database_url,
        model=args.model or defaults.model,
        model_base_url=args.model_base_url,
        model_api_key=os.environ.get("STATECORE_MODEL_API_KEY") or os.environ.get("OPENAI_API_KEY"),
        encoding=args.encoding or defaults.encoding,
        migrate=not args.no_migrate,
        encryption_keys=settings.encryption_keys,
        dev=True,
        dev_port=defaults.dev_port if args.port is None else args.port,
        dev_ui_port=defaults.dev_ui_port if args.ui_port is None else args.ui_port,
        data_dir=args.data_dir or defaults.data_dir,
    )
    await run_worker(config)  # until SIGINT or SIGTERM
    return 0
