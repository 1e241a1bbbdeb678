"""Run a statecore worker: ``python worker.py [FLAGS]`` is ``statecore worker [FLAGS]``.

    python worker.py --dev                  # embedded Temporal dev server + Web UI, SQLite
    python worker.py                        # connect to $TEMPORAL_ADDRESS (localhost:7233)
    python worker.py --profile cloud        # a temporal.toml profile (TLS, API key, mTLS)
    python worker.py --database-url postgresql+asyncpg://app@db/agents --model openai:gpt-4o-mini \\
        --model-base-url http://localhost:8000/v1

`statecore worker --help` lists every flag and its environment variable
(statecore.temporal._settings reads them all).
"""

from __future__ import annotations

import sys

from statecore.cli._app import exit_process, run_command


def main(argv: list[str] | None = None) -> int:
    return run_command(["worker", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    exit_process(main())
