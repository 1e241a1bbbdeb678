"""A turn's reply over HTTP as Server-Sent Events, and a minimal chat page on it.

``create_app(sessions)`` is an ASGI application (Starlette; ``pip install 'statecore[web]'``)::

    GET /                                                   the chat page (?agent=&session=)
    GET /api/sessions/{agent}/{session}/turns/{turn_id}/events?content=TEXT[&after=POSITION]

The events endpoint sends ``content`` as turn ``turn_id`` (a resend of the same id commits
once) and streams its events (``statecore.contract._streams``): ``text``, ``tool_call`` and
``restarted`` each carry their position as the SSE ``id``, so a reconnecting EventSource
(``Last-Event-ID``) or a reloaded page (``after=``) resumes where it was; ``final`` carries
the turn's result and ends the stream; ``error`` carries a statecore error's code and message.
The deltas come from the database, so the app runs in any process that reaches the database
and Temporal, never beside the worker necessarily. See docs/streaming.md.
"""

from __future__ import annotations

from statecore.web._app import create_app

__all__ = ["create_app"]
