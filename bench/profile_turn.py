"""Where a turn's worker CPU goes: py-spy samples of the real ``statecore worker``.

    .venv/bin/python bench/profile_turn.py                   # SQLite, 2,000 turns
    .venv/bin/python bench/profile_turn.py --db postgresql   # a fresh PostgreSQL database
    .venv/bin/python bench/profile_turn.py --turns 200       # a quick look

One AgentSession (offline model, every default) takes N sequential turns through
``AgentSessionClient.send`` against a headless dev server; the worker runs in its own process
and ``py-spy record --format raw --gil --nonblocking`` samples it while the measured turns run
(``--gil``: only samples where a thread holds the GIL, i.e. Python doing work, not waiting).
Writes ``bench/results/profile_turn_<db>.txt`` (the tables), ``.json`` (the tables and the
worker's CPU per turn) and ``.folded.gz`` (py-spy's folded stacks, for a flame graph). The
tables, each the top 20 by samples: the leaf function, the leaf's library, and the nearest
statecore function on the stack (the statecore code that caused the work, wherever the leaf
is).

py-spy is a benchmark tool, not a dependency: install it with
``.venv/bin/uv pip install --python .venv/bin/python py-spy``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the repository importable
    sys.path.insert(0, str(ROOT))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import AsyncIterator  # noqa: E402
from contextlib import asynccontextmanager  # noqa: E402
from tempfile import TemporaryDirectory  # noqa: E402
from typing import Any  # noqa: E402

from temporalio.client import Client  # noqa: E402

from bench.environment import machine_info  # noqa: E402
from bench.worker_process import export_commit, worker_process  # noqa: E402
from statecore.temporal._client import AgentSessionClient  # noqa: E402
from statecore.temporal._converter import statecore_data_converter  # noqa: E402
from statecore.temporal._devserver import start_dev_server  # noqa: E402
from tests.dbs import create_database, drop_database, server_down_reason  # noqa: E402

RESULTS = ROOT / "bench" / "results"
CONTENT = "turn {n}: please look at what we have so far and suggest the next step."
TOP = 20
# A py-spy raw frame: "function (path/to/file.py:123)".
_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


@asynccontextmanager
async def database(db: str, tmp: Path) -> AsyncIterator[str]:
    """A fresh database URL for ``db`` (dropped afterwards on PostgreSQL)."""
    if db == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp / 'profile.db'}"
        return
    reason = await server_down_reason(db)
    if reason is not None:
        raise SystemExit(f"{db} is not reachable: {reason}")
    url = await create_database(db, "profile")
    try:
        yield url
    finally:
        await drop_database(url)


def library(path: str) -> str:
    """The library of a frame's file as py-spy shortens it ("sqlalchemy/engine/base.py",
    "contextlib.py"): its first part, or ``statecore.<package>`` for statecore's own."""
    parts = Path(path).parts
    if not parts:
        return "?"
    if parts[0] == "statecore" and len(parts) > 1:
        return f"statecore.{parts[1].removesuffix('.py')}"
    return parts[0].removesuffix(".py")


def _is_own(path: str) -> bool:
    # statecore's code that does a turn's work; the CLI frame is only the process's root.
    parts = Path(path).parts
    return bool(parts) and parts[0] == "statecore" and parts[1:2] != ("cli",)


def _frame(text: str) -> tuple[str, str]:
    m = _FRAME.match(text.strip())
    if m is None:
        return text.strip(), ""
    return m["func"], m["file"]


def _short(func: str, path: str) -> str:
    return f"{path}:{func}"


def tables(folded: str) -> dict[str, Any]:
    """Top-``TOP`` tables from py-spy's raw (folded) output."""
    leaf: Counter[str] = Counter()
    leaf_lib: Counter[str] = Counter()
    nearest: Counter[str] = Counter()
    total = 0
    for line in folded.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_frame(f) for f in stack.split(";")]
        frames = [f for f in frames if f[1]]  # drop the thread/process label frames
        if not frames:
            continue
        total += count
        func, path = frames[-1]
        leaf[_short(func, path)] += count
        leaf_lib[library(path)] += count
        own = next((f for f in reversed(frames) if _is_own(f[1])), None)
        nearest[_short(*own) if own else "(no statecore frame)"] += count

    def top(c: Counter[str]) -> list[dict[str, Any]]:
        return [
            {"name": k, "samples": v, "share": round(v / total, 4) if total else 0.0}
            for k, v in c.most_common(TOP)
        ]

    return {
        "samples": total,
        "leaf_function": top(leaf),
        "leaf_library": top(leaf_lib),
        "nearest_statecore_function": top(nearest),
    }


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def render(result: dict[str, Any]) -> str:
    t = result["tables"]
    lines = [
        f"profile of a turn: {result['db']}, {result['turns']} turns, "
        f"{t['samples']} GIL-holding samples at {result['rate']} Hz",
        f"worker CPU: {result['worker_cpu_ms_per_turn']:.2f} ms per turn "
        f"(py-spy --nonblocking; the sampler's own CPU is not the worker's)",
        f"statecore: {result['statecore_revision']}; repository at "
        f"{result['machine'].get('git_commit') or '?'}",
        "",
    ]
    for key, title in (
        ("leaf_library", "leaf library"),
        ("leaf_function", "leaf function"),
        ("nearest_statecore_function", "nearest statecore function"),
    ):
        lines.append(f"top {TOP} by {title}")
        for row in t[key]:
            lines.append(f"  {100 * row['share']:5.1f}%  {row['samples']:7d}  {row['name']}")
        lines.append("")
    return "\n".join(lines)


async def profile(
    db: str, turns: int, warmup: int, rate: int, out_dir: Path, rev: str | None = None
) -> dict[str, Any]:
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        raise SystemExit(
            "py-spy is not installed: .venv/bin/uv pip install --python .venv/bin/python py-spy"
        )
    with TemporaryDirectory(prefix="statecore-profile-") as tmp_text:
        tmp = Path(tmp_text)
        code = export_commit(rev, tmp / "code") if rev else ROOT
        server = await start_dev_server(db_filename=str(tmp / "temporal.db"))
        try:
            async with (
                database(db, tmp) as url,
                worker_process(server.address, url, code=code, log_dir=tmp) as worker,
            ):
                client = await Client.connect(
                    server.address, data_converter=statecore_data_converter()
                )
                sessions = AgentSessionClient(client, task_queue=worker.task_queue)
                session = f"profile-{uuid.uuid4().hex[:8]}"

                async def send(n: int) -> None:
                    await sessions.send("bench", session, CONTENT.format(n=n))

                for n in range(warmup):
                    await send(n)
                raw = tmp / "profile.txt"
                sampler = subprocess.Popen(
                    [
                        *(spy, "record", "--pid", str(worker.pid), "--format", "raw"),
                        *("--gil", "--nonblocking", "--rate", str(rate), "--output", str(raw)),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                )
                await asyncio.sleep(1.0)  # let py-spy attach before the measured turns
                cpu0, t0 = worker.cpu_seconds(), time.monotonic()
                for n in range(warmup, warmup + turns):
                    await send(n)
                cpu1, t1 = worker.cpu_seconds(), time.monotonic()
                sampler.send_signal(signal.SIGINT)
                _, err = await asyncio.to_thread(sampler.communicate, timeout=60)
                if not raw.exists():
                    raise RuntimeError(f"py-spy wrote no profile: {err.decode(errors='replace')}")
                folded = raw.read_text()
        finally:
            server.stop()
    folded_path = out_dir / f"profile_turn_{db}.folded.gz"
    folded_path.write_bytes(gzip.compress(folded.encode(), mtime=0))
    return {
        "db": db,
        "turns": turns,
        "warmup_turns": warmup,
        "rate": rate,
        "statecore_revision": rev or "working tree",
        "wall_seconds": round(t1 - t0, 2),
        "worker_cpu_ms_per_turn": round(1000 * (cpu1 - cpu0) / turns, 3),
        "folded": _shown(folded_path),
        "machine": machine_info(),
        "tables": tables(folded),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--db", choices=("sqlite", "postgresql"), default="sqlite")
    p.add_argument("--turns", type=int, default=2000, help="measured turns")
    p.add_argument("--warmup", type=int, default=20, help="turns before sampling starts")
    p.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    p.add_argument("--out-dir", type=Path, default=RESULTS)
    p.add_argument("--rev", help="profile the statecore of this commit (default: this tree)")
    p.add_argument("--label", default="", help="suffix of the result files, e.g. 'before'")
    a = p.parse_args(argv)
    a.out_dir.mkdir(parents=True, exist_ok=True)
    result = asyncio.run(profile(a.db, a.turns, a.warmup, a.rate, a.out_dir, a.rev))
    stem = f"profile_turn_{a.db}{'_' + a.label if a.label else ''}"
    folded = a.out_dir / f"profile_turn_{a.db}.folded.gz"
    if a.label:
        folded = folded.rename(a.out_dir / f"{stem}.folded.gz")
        result["folded"] = _shown(folded)
    (a.out_dir / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    (a.out_dir / f"{stem}.txt").write_text(render(result) + "\n")
    print(render(result))


if __name__ == "__main__":
    main()
