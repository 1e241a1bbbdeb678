"""LangGraph on statecore: ``StatecoreSaver``, a checkpointer on statecore's SQL databases.

Needs the ``langgraph`` extra (``pip install 'statecore[langgraph]'``)::

    async with StatecoreSaver.from_conn_string("sqlite:///agent.db") as saver:
        await saver.asetup()
        graph = builder.compile(checkpointer=saver)
"""

from __future__ import annotations

try:
    import langgraph.checkpoint.base  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise ImportError(
        "statecore.integrations.langgraph needs LangGraph: pip install 'statecore[langgraph]'"
    ) from exc

from statecore.core._errors import CheckpointTooLargeError, CorruptCheckpointError
from statecore.integrations.langgraph._saver import MAX_VALUE_BYTES, StatecoreSaver
from statecore.integrations.langgraph._turns import LangGraphAgent

__all__ = [
    "MAX_VALUE_BYTES",
    "CheckpointTooLargeError",
    "CorruptCheckpointError",
    "LangGraphAgent",
    "StatecoreSaver",
]
