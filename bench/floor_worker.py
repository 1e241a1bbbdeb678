"""A worker with nothing of statecore in it: ``bench/floor.py``'s FloorSession and its no-op
activity, for the floor of worker CPU per turn (``bench/cpu_per_turn.py --floor``).

    python bench/floor_worker.py ADDRESS TASK_QUEUE

Temporal's defaults throughout (data converter, sandboxed workflow runner), as a program
that uses Temporal without statecore would have them; the heap built at start-up is frozen
out of the garbage collector as ``statecore worker`` does. Prints ``READY_LINE`` once
polling.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the repository importable
    sys.path.insert(0, str(ROOT))

import asyncio  # noqa: E402
import gc  # noqa: E402
import signal  # noqa: E402

from temporalio.client import Client  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from bench.floor import FloorSession, noop  # noqa: E402
from bench.worker_process import READY_LINE  # noqa: E402


async def serve(address: str, task_queue: str) -> None:
    client = await Client.connect(address)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    async with Worker(client, task_queue=task_queue, workflows=[FloorSession], activities=[noop]):
        # As ``statecore worker`` does once it polls: the same process set-up for both.
        gc.collect()
        gc.freeze()
        print(f"{READY_LINE} {task_queue}", flush=True)
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], sys.argv[2]))
