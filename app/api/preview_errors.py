"""``GET /api/sandboxes/{id}/preview-errors``: the errors a sandbox's preview pages reported (SSE).

The preview proxy stores what the injected reporter sends (:mod:`sandbox.preview.error_ingest`)
in a capped Redis stream per sandbox (:mod:`sandbox.preview.error_stream`); this endpoint
replays it and follows it live, for the owner only (anyone else: 404, as for every sandbox
route). Each event is::

    id: <stream id, e.g. 1764215000123-0>
    event: preview_error
    data: {"type": "preview_error", "kind", "message", "stack", "source", "url", "count"}

``Last-Event-ID`` (or ``?after=``) resumes after that id; without one the stream starts at the
oldest error kept. Streams count toward the user's limit (:mod:`app.api.stream_limits`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from app.api.auth import require_user
from app.api.errors import ApiError
from app.api.ownership import owned_sandbox
from app.api.services import services
from app.api.sse import EventStreamResponse
from sandbox import PreviewErrorStream, SandboxUnavailable, valid_stream_id

EVENT_TYPE = "preview_error"
log = logging.getLogger(__name__)


def resume_after(last_event_id: str | None, after: str | None) -> str:
    """The stream id to resume after: ``Last-Event-ID`` wins over ``?after=``; ``0-0`` from
    the oldest. A value that is no stream id is a 400 in words."""
    for name, raw in (("Last-Event-ID", last_event_id), ("after", after)):
        if raw is None or raw.strip() == "":
            continue
        try:
            return valid_stream_id(raw.strip())
        except ValueError as exc:
            message = f"{name} must be a preview error id like '1764215000123-0', not {raw!r}"
            raise ApiError(400, "invalid_request", message) from exc
    return "0-0"


async def as_events(
    stream: PreviewErrorStream, sandbox_id: str, after: str
) -> AsyncIterator[tuple[int | str, dict[str, Any]]]:
    """The stored errors as SSE events (``type`` names the event). Redis going away ends the
    stream cleanly: the browser's ``EventSource`` comes back with ``Last-Event-ID``."""
    try:
        async for stream_id, error in stream.follow(sandbox_id, after):
            yield stream_id, {"type": EVENT_TYPE, **error}
    except SandboxUnavailable as exc:
        log.warning("preview errors of %r: %s", sandbox_id, exc)


class PreviewErrorEvents:
    """``GET /api/sandboxes/{id}/preview-errors``: an ASGI endpoint (the answer is a stream)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the caller and the resume point, then stream."""
        request = Request(scope, receive)
        user = await require_user(request)
        found = services(request)
        sandbox = await owned_sandbox(
            found.store, found.sandboxes, user.id, request.path_params["id"]
        )
        after = resume_after(
            request.headers.get("last-event-id"), request.query_params.get("after")
        )
        stream: PreviewErrorStream | None = getattr(request.app.state, "preview_errors", None)
        if stream is None:
            raise ApiError(503, "preview_errors_unavailable", "preview errors are not kept here")
        with found.streams.held(user.id):
            events = as_events(stream, sandbox.id, after)
            response = EventStreamResponse(
                events, found.settings.sse_ping_interval, until=found.stopping
            )
            await response(scope, receive, send)


ROUTES = [Route("/api/sandboxes/{id}/preview-errors", PreviewErrorEvents(), methods=["GET"])]
