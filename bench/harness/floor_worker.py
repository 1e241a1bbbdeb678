"""A worker with nothing of statecore in it: ``bench/harness/floor.py``'s FloorSession and its no-op
activity, for the floor of worker CPU per turn (``bench/cpu_per_turn.py --floor``).

    python -m bench.harness.floor_worker ADDRESS TASK_QUEUE

Temporal's defaults throughout (data converter, sandboxed workflow runner), as a program
that uses Temporal without statecore would have them; the heap built at start-up is frozen
out of the garbage collector as ``statecore worker`` does. Prints ``READY_LINE`` once
polling.
"""

from __future__ import annotations

import asyncio
import gc
import signal
import sys

from temporalio.client import Client
from temporalio.worker import Worker

from bench.harness.floor import FloorSession, noop
from bench.harness.worker_process import READY_LINE


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
