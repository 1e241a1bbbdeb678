"""Google ADK on statecore: its ``SessionService``, and its agents as durable turns.

Needs the ``google-adk`` extra: ``pip install 'statecore[google-adk]'``.
"""

from __future__ import annotations

try:
    import google.adk as _adk  # noqa: F401  (the check that the extra is installed)
except ImportError as exc:  # pragma: no cover - exercised in a bare environment only
    raise ImportError(
        "statecore.integrations.google_adk needs Google ADK; install it with "
        "pip install 'statecore[google-adk]'"
    ) from exc

from statecore.integrations.google_adk._errors import ADKSessionExistsError, StaleADKSessionError
from statecore.integrations.google_adk._offline import OfflineLlm
from statecore.integrations.google_adk._session_service import StatecoreSessionService

__all__ = ["ADKSessionExistsError", "OfflineLlm", "StaleADKSessionError", "StatecoreSessionService"]
