"""CPU of context assembly by window length: ``build_context`` alone, one version against another.

    .venv/bin/python bench/context_cpu.py --before 95d9b50~1 --after 95d9b50
    .venv/bin/python bench/context_cpu.py --before f53f633 --rounds 2 --calls 20   # smoke

Every chat turn rebuilds its context from the stored window, so whatever context assembly
does per window message grows with the window: up to the model's budget, thousands of
messages in a long session. This times ``statecore.operations._context_window.build_context`` on
windows of ``--sizes`` stored messages (alternating user and assistant, 25 tokens each,
or with a tool call and its result every tenth message with ``--tools``), a budget they
all fit (123,904 tokens, the offline model's), and one new user message. Each run is a
fresh process with the version's code first on ``sys.path``; it builds the windows, then
times ``--calls`` calls per size (``time.process_time``). The two versions alternate
round by round (A B, B A, ...); per size the result has each version's mean with a 95%
interval and the paired difference. Writes ``bench/results/context_cpu.json``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the repository importable
    sys.path.insert(0, str(ROOT))

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
from typing import Any  # noqa: E402

from bench.cpu_per_turn import summary  # noqa: E402
from bench.environment import machine_info  # noqa: E402
from bench.worker_process import exported_versions, round_order  # noqa: E402

RESULTS = ROOT / "bench" / "results"
DEFAULT_SIZES = (100, 500, 1500, 4000)

# One measured run, in a fresh interpreter with ``code`` first on sys.path. Prints JSON.
_CHILD = r"""
import json, sys, time
from datetime import UTC, datetime
code, sizes, calls, tools = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
sys.path.insert(0, code)
import statecore
assert statecore.__file__.startswith(code), statecore.__file__
from statecore.operations._context_window import build_context
from statecore.core._models import Message, StoredMessage, ToolCall
from statecore.core._tokens import TokenCounter

counter = TokenCounter()
now = datetime.now(UTC)

def window(size):
    out, total = [], 0
    for seq in range(1, size + 1):
        total += 25
        turn = f"t{(seq + 1) // 2}"
        fields = dict(seq=seq, turn_id=turn, index=(seq + 1) % 2, tokens=25,
                      cumulative_tokens=total, created_at=now)
        if tools and seq % 10 == 9:
            call = ToolCall(id=f"c{seq}", name="lookup", arguments="{}")
            out.append(StoredMessage(role="assistant", tool_calls=[call], **fields))
        elif tools and seq % 10 == 0:
            out.append(StoredMessage(role="tool", tool_call_id=f"c{seq - 1}",
                                     content="found it", **fields))
        else:
            role = "user" if seq % 2 else "assistant"
            out.append(StoredMessage(role=role, content=f"message {seq} of the log",
                                     **fields))
    return out

new = [Message(role="user", content="and what next?")]
result = {}
for size in map(int, sizes.split(",")):
    stored = window(size)
    def build():
        return build_context(system_prompt="You are helpful.", summary=None, hints=[],
                             window=stored, new_messages=new, max_tokens=123904,
                             counter=counter)
    assert build().window_messages == size
    cpu = time.process_time()
    for _ in range(calls):
        build()
    result[str(size)] = 1000 * (time.process_time() - cpu) / calls
print(json.dumps(result))
"""


def one_run(code: Path, sizes: tuple[int, ...], calls: int, tools: bool) -> dict[str, float]:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _CHILD,
            str(code),
            ",".join(map(str, sizes)),
            str(calls),
            "1" if tools else "0",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, "PYTHONPATH": ""},
    )
    if done.returncode != 0:
        raise RuntimeError(f"context run failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--before", required=True, help="commit of the 'before' statecore")
    p.add_argument("--after", help="commit of the 'after' statecore (default: this tree)")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--calls", type=int, default=200, help="timed calls per size and run")
    p.add_argument(
        "--sizes",
        default=",".join(map(str, DEFAULT_SIZES)),
        help="window lengths in messages, comma-separated",
    )
    p.add_argument("--tools", action="store_true", help="a tool call and result every 10")
    p.add_argument("--out", type=Path, help="default: bench/results/context_cpu.json")
    a = p.parse_args(argv)
    if a.rounds < 2:
        p.error("--rounds must be at least 2 for a confidence interval")
    sizes = tuple(int(s) for s in a.sizes.split(","))
    with exported_versions(a.before, a.after) as versions:
        runs: list[dict[str, dict[str, float]]] = []
        for r in range(a.rounds):
            order = round_order(r)
            got = {name: one_run(versions[name], sizes, a.calls, a.tools) for name in order}
            runs.append(got)
            print(
                f"round {r + 1}/{a.rounds}: "
                + "; ".join(
                    f"{n} " + ", ".join(f"{s}: {got[n][str(s)]:.2f}" for s in sizes)
                    for n in order
                ),
                flush=True,
            )
    by_size: dict[str, Any] = {}
    for size in map(str, sizes):
        before = [g["before"][size] for g in runs]
        after = [g["after"][size] for g in runs]
        by_size[size] = {
            "before": summary(before),
            "after": summary(after),
            "after_minus_before": summary([y - x for x, y in zip(before, after, strict=True)]),
        }
    result: dict[str, Any] = {
        "what": "CPU ms per build_context call, by window length in messages",
        "window": "tool call and result every 10 messages" if a.tools else "plain messages",
        "before_revision": a.before,
        "after_revision": a.after or "working tree",
        "rounds": a.rounds,
        "calls_per_run": a.calls,
        "by_window_messages": by_size,
        "machine": machine_info(),
    }
    out = a.out or RESULTS / "context_cpu.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    for size, s in by_size.items():
        d = s["after_minus_before"]
        print(
            f"{size} messages: before {s['before']['mean']:.2f} ms, after "
            f"{s['after']['mean']:.2f} ms, after - before {d['mean']:.2f} "
            f"({d['ci95'][0]:.2f} .. {d['ci95'][1]:.2f})"
        )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
