"""One writer process of the cross-process stale-session test.

Usage: python -m tests.integrations.google_adk.stale_writer_process <url> <app> <session id>
<go file prefix> <rounds> <name>. Each round: loads the session, says "loaded", waits for the
round's go file, appends one event and prints "stored" or "stale".
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from google.adk.errors import StaleSessionError

from statecore.integrations.google_adk import StatecoreSessionService
from tests.integrations.google_adk.contract_cases import event

#: The longest a writer waits for the go file.
GO_TIMEOUT_SECONDS = 60.0


async def main(url: str, app: str, session_id: str, go: str, rounds: int, name: str) -> None:
    service = StatecoreSessionService(database_url=url)
    try:
        for round_ in range(rounds):
            session = await service.get_session(app_name=app, user_id="u1", session_id=session_id)
            assert session is not None
            print("loaded", flush=True)
            await _wait_for(Path(f"{go}-{round_}"))
            try:
                await service.append_event(session, event(text=f"{name}-{round_}"))
                print("stored", flush=True)
            except StaleSessionError:
                print("stale", flush=True)
    finally:
        await service.close()


async def _wait_for(go: Path) -> None:
    deadline = time.monotonic() + GO_TIMEOUT_SECONDS
    while not go.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no go file {go} after {GO_TIMEOUT_SECONDS} s")
        await asyncio.sleep(0.005)


if __name__ == "__main__":
    url, app, sid, go, rounds, name = sys.argv[1:7]
    asyncio.run(main(url, app, sid, go, int(rounds), name))
