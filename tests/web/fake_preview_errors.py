"""The stand-in's per-sandbox preview-error stream (``GET /api/sandboxes/{id}/preview-errors``),
as issue 23's contract says: SSE, each event ``event: preview_error``, ``id:`` a stream id,
``data:`` the error dict; ``Last-Event-ID`` (or ``?after=``) resumes after that id. Ids look like
kiln's (Redis stream ids, ``<ms>-<n>``): the time of the report, then its index + 1.

The test thread only appends to :attr:`PreviewErrorLog.reports` (a list append is atomic); the
stream looks for new entries every :data:`POLL_SECONDS` on uvicorn's loop. ``cut_every`` closes
every connection after that many events, the way a proxy or a restart would, and
``resumed_from`` records what each connection asked to resume after.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

POLL_SECONDS = 0.05


@dataclass
class PreviewErrorLog:
    """Every sandbox's reports (stream id = index + 1), and the knobs a test turns."""

    reports: dict[str, list[tuple[int, dict[str, Any]]]] = field(default_factory=dict)
    cut_every: int = 0  # close a connection after this many events (0: never)
    resumed_from: list[str] = field(default_factory=list)  # each connection's Last-Event-ID
    unavailable: int = 0  # refuse this many connections with a 503 first
    frame_loads: int = 0  # preview sign-ins (a frame (re)loading), counted by the preview host
    after_frame_load: bool = False  # a connection sends nothing before the next frame load

    def report(self, sandbox_id: str, error: dict[str, Any], age: float = 0.0) -> None:
        """What the preview's page reported (a whole error dict of the contract), ``age``
        seconds ago."""
        stamp = int((time.time() - age) * 1000)
        self.reports.setdefault(sandbox_id, []).append((stamp, error))

    async def follow(self, sandbox_id: str, after: int) -> AsyncIterator[bytes]:
        """SSE frames of ``sandbox_id``'s reports after stream id ``after``."""
        sent, seq, loads = 0, after, self.frame_loads
        yield b"retry: 300\n\n"
        while self.after_frame_load and self.frame_loads <= loads:
            await asyncio.sleep(POLL_SECONDS)
        while True:
            batch = self.reports.get(sandbox_id, [])[seq:]
            for stamp, error in batch:
                seq += 1
                data = json.dumps(error, separators=(",", ":"))
                yield f"id: {stamp}-{seq}\nevent: preview_error\ndata: {data}\n\n".encode()
                sent += 1
                if self.cut_every and sent >= self.cut_every:
                    return
            if not batch:
                await asyncio.sleep(POLL_SECONDS)


async def preview_errors(
    log: PreviewErrorLog,
    known: Callable[[Request, str], bool],
    error: Callable[[int, str, str], Response],
    request: Request,
) -> Response:
    """The route: owner only (``known`` says whether the request's person has the sandbox)."""
    sandbox = request.path_params["id"]
    if not known(request, sandbox):
        return error(404, "sandbox_not_found", f"no sandbox {sandbox!r}")
    if log.unavailable > 0:
        log.unavailable -= 1
        return error(503, "preview_errors_unavailable", "preview errors are not kept here")
    raw = request.headers.get("last-event-id") or request.query_params.get("after") or ""
    log.resumed_from.append(raw)
    index = raw.rpartition("-")[2]
    after = int(index) if index.isdigit() else 0
    return StreamingResponse(log.follow(sandbox, after), media_type="text/event-stream")
