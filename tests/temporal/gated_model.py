"""The offline model behind a gate: a turn enters the model and waits there until the test
opens the gate, so a signal can land at an exact point around a turn (while its run drains
for continue-as-new, as its reply is released, just after it returned).

Only names that every recorded version of statecore has are imported, so the history
recorder (tests/temporal/record_control_histories.py) can use it against an older checkout.
"""

from __future__ import annotations

import asyncio
from typing import Any

from statecore.llm._offline import OfflineModel

#: Longest a turn waits at the gate: a test that forgets to open it fails instead of hanging.
GATE_TIMEOUT_S = 20
#: Session options under which every turn ends its run.
ONE_TURN_PER_RUN = {"max_turns_per_run": 1}


class GatedModel:
    """The offline model, answering only once the gate is open."""

    name = "gated"

    def __init__(self) -> None:
        self._inner = OfflineModel()
        self.gate = asyncio.Event()
        self.gate.set()
        self.entered = asyncio.Event()

    async def complete(self, request: Any) -> Any:
        self.entered.set()
        await asyncio.wait_for(self.gate.wait(), timeout=GATE_TIMEOUT_S)
        return await self._inner.complete(request)
