"""Runs: ``GET /api/runs/{id}``, ``GET /api/runs/{id}/events`` (SSE), ``POST .../cancel``.

The event stream replays from ``Last-Event-ID`` (header) or ``?after=<seq>`` and then follows
the run live until ``run_finished``; how replay and live events are stitched together without a
gap or a duplicate is the run service's ``follow`` (subscribe, replay, drop live duplicates by
``seq``). Ownership is checked before anything is streamed: another user's run is a 404. One
user may hold a bounded number of streams open (:mod:`app.api.stream_limits`): 429 beyond it.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from app.api.auth import require_user
from app.api.ownership import owned_run
from app.api.services import services
from app.api.sse import EventStreamResponse, resume_point
from app.api.views import run_view


async def get_run(request: Request) -> Response:
    """``GET /api/runs/{id}`` -> the run."""
    user = await require_user(request)
    run = await owned_run(services(request).store, user.id, request.path_params["run_id"])
    return JSONResponse(run_view(run))


async def cancel_run(request: Request) -> Response:
    """``POST /api/runs/{id}/cancel`` -> ``202 {run}``; 409 if the run already ended.

    A queued run ends ``cancelled`` at once; a running one is told to stop and ends shortly
    after (its ``run_finished`` event says when).
    """
    user = await require_user(request)
    found = services(request)
    run = await owned_run(found.store, user.id, request.path_params["run_id"])
    updated = await found.runs.cancel(user.id, run.id)
    return JSONResponse({"run": run_view(updated)}, 202)


class RunEvents:
    """``GET /api/runs/{id}/events``: an ASGI endpoint (the answer is a stream, not a body)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the caller and the resume point, then stream."""
        request = Request(scope, receive)
        user = await require_user(request)
        found = services(request)
        run = await owned_run(found.store, user.id, request.path_params["run_id"])
        after = resume_point(
            request.headers.get("last-event-id"), request.query_params.get("after")
        )
        with found.streams.held(user.id):
            async with found.runs.follow(run.id, after) as events:
                stream = EventStreamResponse(
                    events, found.settings.sse_ping_interval, until=found.stopping
                )
                await stream(scope, receive, send)


ROUTES = [
    Route("/api/runs/{run_id}", get_run, methods=["GET"]),
    Route("/api/runs/{run_id}/events", RunEvents(), methods=["GET"]),
    Route("/api/runs/{run_id}/cancel", cancel_run, methods=["POST"]),
]
