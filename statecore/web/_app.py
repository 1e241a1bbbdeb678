"""The ASGI app of ``statecore.web``: the SSE endpoint and the chat page."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from importlib import resources
from typing import TYPE_CHECKING, Any

from statecore.contract._streams import FinalEvent, StreamPosition
from statecore.core._errors import InvalidInputError, StatecoreError
from statecore.core._limits import DEFAULT_STREAM_POLL_SECONDS, MAX_MESSAGE_BYTES

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from statecore.temporal._client import AgentSessionClient

#: Sent while nothing else is, so proxies and browsers keep an idle stream open.
KEEPALIVE = ": keep-alive\n\n"


def create_app(
    sessions: AgentSessionClient,
    *,
    poll_interval: float = DEFAULT_STREAM_POLL_SECONDS,
    page: bool = True,
) -> Starlette:
    """The app: ``sessions`` (an ``AgentSessionClient`` with its ``store``) sends the turns and
    reads their streams. ``page=False`` leaves the chat page out."""
    try:
        from starlette.applications import Starlette
        from starlette.responses import HTMLResponse, JSONResponse, StreamingResponse
        from starlette.routing import Route
    except ImportError as exc:  # an optional extra
        raise StatecoreError(
            "statecore.web needs Starlette: install statecore with the web extra "
            "(pip install 'statecore[web]')"
        ) from exc
    if sessions.store is None:
        raise InvalidInputError(
            "create_app reads replies from the database: build the AgentSessionClient with "
            "store=open_store(url)",
            field="store",
        )

    async def events(request: Request) -> Response:
        params = request.path_params
        agent, session, turn_id = params["agent"], params["session"], params["turn_id"]
        content = request.query_params.get("content")
        after = request.headers.get("last-event-id") or request.query_params.get("after") or ""
        try:
            if content is not None and len(content.encode()) > MAX_MESSAGE_BYTES:
                raise InvalidInputError("content is over the message size limit")
            position = StreamPosition.parse(after) if after else None
            stream = sessions.stream(
                agent,
                session,
                content,
                turn_id=turn_id,
                position=position,
                poll_interval=poll_interval,
            )
        except StatecoreError as exc:
            return JSONResponse(_error(exc), status_code=400)
        return StreamingResponse(
            _sse(stream),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def chat_page(request: Request) -> Response:
        html = resources.files("statecore.web").joinpath("chat.html").read_text("utf-8")
        return HTMLResponse(html)

    routes = [Route("/api/sessions/{agent}/{session}/turns/{turn_id}/events", events)]
    if page:
        routes.append(Route("/", chat_page))
    return Starlette(routes=routes)


async def _sse(stream: AsyncIterator[Any]) -> AsyncIterator[str]:
    """The events as SSE frames; an error as an ``error`` event. Leaving (the client went
    away) closes ``stream``, which leaves the turn running."""
    try:
        yield KEEPALIVE
        async for event in stream:
            data = event.model_dump_json()
            if isinstance(event, FinalEvent):
                yield f"event: final\ndata: {data}\n\n"
                return
            yield f"id: {event.position}\nevent: {event.type}\ndata: {data}\n\n"
    except StatecoreError as exc:
        yield f"event: error\ndata: {json.dumps(_error(exc))}\n\n"
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()


def _error(exc: StatecoreError) -> dict[str, Any]:
    return {"error": {"code": exc.code, "message": exc.message}}
