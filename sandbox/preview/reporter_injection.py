"""kiln's scripts in preview pages: the error reporter (``/__kiln/reporter.js``) and select mode
(``/__kiln/select.js``, off until the kiln UI around the frame turns it on), as
``<script>`` tags in the served HTML.

Only the preview proxy adds them, on its way to the browser: a page navigation (``GET``, HTML)
from the dev server gets the tags early in ``<head>`` (before the app's own scripts, so their
errors are seen), and the scripts are served by the proxy from this package (:data:`SCRIPTS`). The
project's files, its versions, its zips and its ``npm run build`` output never contain it.

For such a navigation the proxy asks the dev server for an uncompressed body
(``Accept-Encoding: identity``), reads at most :data:`MAX_HTML_BYTES` of it and fixes
``Content-Length``; a body that is compressed anyway, or larger, goes through untouched.
Everything else streams as before.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import httpx
from starlette.types import Send

REPORTER_PATH = "/__kiln/reporter.js"
SELECT_PATH = "/__kiln/select.js"
REPORTS_PATH = "/__kiln/preview-errors"
# The path each script is served at -> its file in this package.
SCRIPTS = {REPORTER_PATH: "reporter.js", SELECT_PATH: "select.js"}
SCRIPT_TAG = b'<script src="/__kiln/reporter.js"></script><script src="/__kiln/select.js"></script>'
MAX_HTML_BYTES = 2 * 1024 * 1024
# The first tag the script may follow: <head ...>, else <html ...>, else the doctype.
HEAD = re.compile(rb"<head(?:\s[^>]*)?>", re.IGNORECASE)
HTML = re.compile(rb"<html(?:\s[^>]*)?>", re.IGNORECASE)
DOCTYPE = re.compile(rb"<!doctype[^>]*>", re.IGNORECASE)
SCRIPT_HEADERS = [
    (b"content-type", b"text/javascript; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-content-type-options", b"nosniff"),
]


@cache
def script_bytes(path: str) -> bytes:
    """The bytes of the script served at ``path`` (one of :data:`SCRIPTS`; read once)."""
    return Path(__file__).with_name(SCRIPTS[path]).read_bytes()


def identity_encoding(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Request headers asking for an uncompressed body (the proxy edits the HTML)."""
    kept = [(name, value) for name, value in headers if name != "accept-encoding"]
    return [*kept, ("accept-encoding", "identity")]


def is_plain_html(response: httpx.Response) -> bool:
    """Whether the dev server's response is HTML the proxy can edit (not compressed)."""
    kind = response.headers.get("content-type", "").lower()
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    return kind.startswith("text/html") and encoding in ("", "identity")


def inject_script(html: bytes) -> bytes:
    """``html`` with kiln's script tags early in ``<head>`` (or as early as it can go)."""
    for pattern in (HEAD, HTML, DOCTYPE):
        match = pattern.search(html)
        if match is not None:
            return html[: match.end()] + SCRIPT_TAG + html[match.end() :]
    return SCRIPT_TAG + html


async def send_with_reporter(
    send: Send, response: httpx.Response, headers: list[tuple[bytes, bytes]]
) -> None:
    """Send an HTML response with kiln's script tags in it (``headers`` are the ones to
    forward). A body past :data:`MAX_HTML_BYTES` goes through untouched, still streamed.

    Raises ``httpx.TransportError`` / ``httpx.StreamError`` when the dev server fails.
    """
    chunks = response.aiter_raw()
    read: list[bytes] = []
    size = 0
    async for chunk in chunks:
        read.append(chunk)
        size += len(chunk)
        if size > MAX_HTML_BYTES:
            break
    else:
        body = inject_script(b"".join(read))
        start = {"type": "http.response.start", "status": response.status_code}
        await send({**start, "headers": with_length(headers, len(body))})
        await send({"type": "http.response.body", "body": body, "more_body": False})
        return
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": b"".join(read), "more_body": True})
    async for chunk in chunks:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def with_length(headers: list[tuple[bytes, bytes]], length: int) -> list[tuple[bytes, bytes]]:
    """``headers`` with ``Content-Length`` set to ``length`` (the edited body's)."""
    kept = [(name, value) for name, value in headers if name != b"content-length"]
    return [*kept, (b"content-length", str(length).encode())]


async def send_script(send: Send, path: str) -> None:
    """Answer ``GET`` of one of :data:`SCRIPTS` (``path``)."""
    body = script_bytes(path)
    headers = with_length(SCRIPT_HEADERS, len(body))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
