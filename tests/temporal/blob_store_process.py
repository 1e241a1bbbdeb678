"""A process that stores blobs one after another until it is killed:
``python -m tests.temporal.blob_store_process DATABASE_URL``. Prints ``storing N`` before each
store and ``stored N`` after it (tests/temporal/test_blob_faults.py kills it in between)."""

from __future__ import annotations

import asyncio
import random
import sys

from temporalio.api.common.v1 import Payload
from temporalio.converter import StorageDriverStoreContext, StorageDriverWorkflowInfo

from statecore.temporal._blob_driver import StatecoreBlobDriver

#: Each payload's size: large enough that a store takes a while (and can be killed mid-way).
PAYLOAD_BYTES = 4 * 1024 * 1024


def payload(number: int) -> Payload:
    """The payload number ``number`` stores, the same in every process."""
    data = random.Random(number).randbytes(PAYLOAD_BYTES // 2).hex().encode()
    return Payload(metadata={"encoding": b"json/plain"}, data=data)


def context(number: int) -> StorageDriverStoreContext:
    return StorageDriverStoreContext(
        target=StorageDriverWorkflowInfo(namespace="default", id=f"wf-{number}", run_id="r")
    )


async def main(url: str) -> None:
    driver = StatecoreBlobDriver(url)
    for number in range(1000):
        print(f"storing {number}", flush=True)
        await driver.store(context(number), [payload(number)])
        print(f"stored {number}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
