"""A session stays on the task queue it opened on: say so when a client sends elsewhere.

``AgentSessionClient(task_queue=...)`` names where new sessions start. A session that is
already running stays on its own queue (update-with-start reaches the running workflow),
so a program that moved to its own queue still has that session's turns answered by the
old queue's workers, with their models and their database. ``send`` compares the two once
per session and warns, naming both queues and the way to move the session.
"""

from __future__ import annotations


class SessionQueueWarning(UserWarning):
    """A session runs on another task queue than the client sending to it."""


def queue_mismatch_message(session: str, running_on: str, client_queue: str) -> str:
    return (
        f"session {session} runs on task queue {running_on!r}, not {client_queue!r} where "
        f"this client starts sessions: its turns are answered by workers of {running_on!r}. "
        f"To move it: AgentSessionClient.migrate(agent_id, session_id, {client_queue!r}) or "
        f"statecore migrate <agent> <session> --task-queue {client_queue}; "
        "or use another session id"
    )
