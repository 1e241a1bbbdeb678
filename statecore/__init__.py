"""statecore: durable state for long-running AI agents on Temporal."""

from statecore.errors import StatecoreError
from statecore.models import Message, SessionRef

__all__ = ["Message", "SessionRef", "StatecoreError"]
