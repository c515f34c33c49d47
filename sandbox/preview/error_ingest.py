"""``POST /__kiln/preview-errors`` on a preview host: a page's error reports, stored.

The preview proxy routes the request here once it has authorized it like any other preview
request (the owner's preview session) and resolved the dev server. The sandbox is the one the
``Host`` names, never anything in the body: a report naming another sandbox lands in this
one's stream as text. Limits, in order (each refusal is JSON with a stable code):

- the body: at most :data:`MAX_BODY_BYTES` (413 ``preview_report_too_large``), a JSON array of
  reports or ``{"reports": [...]}`` (400 ``invalid_preview_report``), at most
  :data:`MAX_BATCH` reports read from it;
- requests: a token bucket per sandbox (429 ``preview_reports_rate_limited`` with
  ``Retry-After``: the reporter script waits);
- reports: normalised (:func:`~sandbox.preview.error_reports.normalize_report`), merged,
  deduplicated per sandbox, then a token bucket per sandbox: beyond it they are dropped;
- each kept report's source is mapped to the original file (:mod:`sandbox.preview.source_map`)
  and it is appended to the sandbox's stream (:mod:`sandbox.preview.error_stream`).

A report is only ever stored and shown: nothing here starts a model turn.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from sandbox.errors import SandboxUnavailable
from sandbox.preview.error_reports import (
    PreviewError,
    ReportDeduper,
    TokenBucket,
    merge,
    normalize_report,
)
from sandbox.preview.error_stream import ErrorStreamSettings, PreviewErrorStream
from sandbox.preview.source_map import SourceMaps, dev_server_modules
from sandbox.preview.upstream import public_origin

MAX_BODY_BYTES = 256 * 1024
MAX_BATCH = 100
REQUESTS_PER_SECOND = 5.0
REQUEST_BURST = 20
RETRY_AFTER_SECONDS = 2
MAX_SANDBOXES = 1000  # per-sandbox limits kept in this process, least recently used dropped


class ReportRefused(Exception):
    """A report request refused: its status, code and words."""

    def __init__(self, status: int, code: str, message: str) -> None:
        """``status`` and ``code`` go in the JSON answer with ``message``."""
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass
class SandboxReports:
    """One sandbox's limits and source maps in this process."""

    requests: TokenBucket
    reports: TokenBucket
    deduper: ReportDeduper = field(default_factory=ReportDeduper)
    base_url: str = ""
    maps: SourceMaps | None = None


class PreviewErrorIngest:
    """Takes reports from preview pages into :class:`PreviewErrorStream`."""

    def __init__(self, stream: PreviewErrorStream) -> None:
        """Store into ``stream`` (its settings give the report rate)."""
        self.stream = stream
        self.settings: ErrorStreamSettings = stream.settings
        self._sandboxes: OrderedDict[str, SandboxReports] = OrderedDict()

    async def handle(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        sandbox_id: str,
        base_url: str,
        client: httpx.AsyncClient,
    ) -> None:
        """Answer one ``POST /__kiln/preview-errors`` for ``sandbox_id`` (from the Host)."""
        try:
            stored = await self._ingest(scope, receive, sandbox_id, base_url, client)
            response: Response = JSONResponse({"stored": stored}, 202)
        except ReportRefused as exc:
            body = {"error": {"code": exc.code, "message": str(exc)}}
            headers = (
                {"Retry-After": str(RETRY_AFTER_SECONDS)} if exc.status in (429, 503) else None
            )
            response = JSONResponse(body, exc.status, headers)
        await response(scope, receive, send)

    async def _ingest(
        self,
        scope: Scope,
        receive: Receive,
        sandbox_id: str,
        base_url: str,
        client: httpx.AsyncClient,
    ) -> int:
        if scope["method"] != "POST":
            raise ReportRefused(405, "method_not_allowed", "preview errors are sent with POST")
        state = self._state(sandbox_id, base_url, client)
        if not state.requests.take():
            msg = f"the preview of sandbox {sandbox_id!r} reports errors too fast; try again later"
            raise ReportRefused(429, "preview_reports_rate_limited", msg)
        raw = parse_reports(await read_body(scope, receive))
        origin = public_origin(scope)
        kept: list[PreviewError] = []
        for error in merge(e for e in (normalize_report(r, origin=origin) for r in raw) if e):
            if state.reports.available() < 1:
                break  # dropped before the deduper sees them: no count stands for a lost one
            admitted = state.deduper.admit(error)
            if admitted is not None and state.reports.take():
                kept.append(admitted)
        if state.maps is not None:
            kept = [await state.maps.map_error(error) for error in kept]
        try:
            await self.stream.append(sandbox_id, kept)
        except SandboxUnavailable as exc:
            raise ReportRefused(503, exc.code, str(exc)) from exc
        return len(kept)

    def _state(self, sandbox_id: str, base_url: str, client: httpx.AsyncClient) -> SandboxReports:
        state = self._sandboxes.get(sandbox_id)
        if state is None:
            rate = self.settings.per_second
            state = SandboxReports(
                TokenBucket(REQUESTS_PER_SECOND, REQUEST_BURST),
                TokenBucket(rate, max(1, self.settings.burst)),
            )
            self._sandboxes[sandbox_id] = state
        self._sandboxes.move_to_end(sandbox_id)
        while len(self._sandboxes) > MAX_SANDBOXES:
            self._sandboxes.popitem(last=False)
        if state.base_url != base_url:  # a new dev server: its modules are other ones
            state.base_url = base_url
            state.maps = SourceMaps(dev_server_modules(client, base_url))
        return state


async def read_body(scope: Scope, receive: Receive) -> bytes:
    """The request body, refused past :data:`MAX_BODY_BYTES` (declared or sent)."""
    for name, value in scope["headers"]:
        if name == b"content-length" and (not value.isdigit() or int(value) > MAX_BODY_BYTES):
            raise too_large()
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ReportRefused(400, "invalid_preview_report", "the page left mid-report")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise too_large()
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def too_large() -> ReportRefused:
    """The refusal of a body past the cap."""
    msg = f"a preview error report may be at most {MAX_BODY_BYTES} bytes"
    return ReportRefused(413, "preview_report_too_large", msg)


def parse_reports(body: bytes) -> list[Any]:
    """The raw reports in a body: a JSON array, or an object with a ``reports`` array."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        msg = f"a preview error report must be JSON: {str(exc)[:200]}"
        raise ReportRefused(400, "invalid_preview_report", msg) from exc
    if isinstance(data, dict):
        data = data.get("reports")
    if not isinstance(data, list):
        msg = "a preview error report is a JSON array of reports (or {'reports': [...]})"
        raise ReportRefused(400, "invalid_preview_report", msg)
    return data[:MAX_BATCH]
