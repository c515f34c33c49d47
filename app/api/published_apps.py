"""Published apps, each at an origin of its own: ``http://<slug>.<apps domain>/``.

:class:`PublishedApps` answers every request whose host is one label under the apps domain
(``KILN_APPS_DOMAIN``, default ``apps.<public host>``) from the stored build its chat's
publication points at (:mod:`app.publish`); every other host passes on. It is a plain static
file server with no notion of a person:

- it never reads a cookie or a credential and never sets one: an app's visitors need no sign-in
  and kiln's session never reaches an app (a page there that calls kiln's API is refused by its
  ``Sec-Fetch-Site`` check, :func:`app.api.auth.check_same_origin`: an app is another origin);
- ``GET`` and ``HEAD`` only; a path names a file of the build (``/`` and a folder's ``/`` its
  ``index.html``); a path without a file extension that names no file gets ``index.html`` (a
  single-page app's own routes), one with an extension a 404;
- ``assets/`` (Vite's content-hashed output) is cached for a year, ``immutable``; everything
  else (``index.html`` first) is ``no-cache``: revalidated every time, by its ``ETag`` (the
  blob's SHA-256), so a re-publish shows at the next load;
- ``X-Content-Type-Options: nosniff``, a content type per extension, a content security policy
  for a static app (its own scripts, https resources, no plugins), no referrer across origins;
- an unknown slug or an unpublished chat is a 404 page in words, at once (the row is read on
  every request; only the immutable manifests are cached).
"""

from __future__ import annotations

import html
import mimetypes
from collections.abc import Callable
from typing import Protocol, TypeVar

import anyio.to_thread
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from app.publish.storage import BuildStorage, Manifest
from app.store.publications import Publication
from sandbox import host_name

T = TypeVar("T")
INDEX = "index.html"
ASSETS = "assets/"
LONG_CACHE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
METHODS = frozenset({"GET", "HEAD"})
MANIFEST_CACHE = 256  # manifests kept parsed in memory (they never change)
CONTENT_POLICY = (
    "default-src 'self' https: data: blob:; "
    "script-src 'self' 'unsafe-inline' https:; "
    "style-src 'self' 'unsafe-inline' https:; "
    "img-src 'self' https: data: blob:; "
    "connect-src 'self' https: wss:; "
    "object-src 'none'; base-uri 'self'; form-action 'self' https:"
)
SAFE_HEADERS = {
    "x-content-type-options": "nosniff",
    "content-security-policy": CONTENT_POLICY,
    "referrer-policy": "strict-origin-when-cross-origin",
    "cross-origin-opener-policy": "same-origin",
}
# Types browsers must get right (mimetypes' table varies by machine); the rest from mimetypes.
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".map": "application/json",
    ".svg": "image/svg+xml",
    ".wasm": "application/wasm",
    ".webmanifest": "application/manifest+json",
    ".txt": "text/plain; charset=utf-8",
    ".woff2": "font/woff2",
    ".woff": "font/woff",
    ".ico": "image/x-icon",
    ".webp": "image/webp",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
}
NOT_FOUND_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Nothing here</title></head>
<body style="font:16px system-ui,sans-serif;max-width:36rem;margin:15vh auto;padding:0 1rem">
<h1>Nothing is published here</h1><p>{reason}</p></body></html>
"""


class SlugLookup(Protocol):
    """What serving needs of the store: the publication a link names."""

    def publication_by_slug(self, slug: str) -> Publication | None:
        """The publication of ``slug``, or None."""
        ...


def app_label(host: str, domain: str) -> str | None:
    """The slug in ``<slug>.<domain>`` (any port), or None for any other host."""
    label, dot, rest = host_name(host).partition(".")
    return label if dot and label and rest == domain else None


def app_url(slug: str, domain: str, port: int | None, scheme: str = "http") -> str:
    """The browser URL of a published app, e.g. ``http://k3x….apps.kiln.localhost:8000/``."""
    default_port = 443 if scheme == "https" else 80
    suffix = "" if port is None or port == default_port else f":{port}"
    return f"{scheme}://{slug}.{domain}{suffix}/"


def content_type(path: str) -> str:
    """The ``Content-Type`` of a file by its extension (``application/octet-stream`` if
    unknown: with ``nosniff``, a browser never runs it)."""
    dot = path.rfind(".")
    extension = path[dot:].lower() if dot > path.rfind("/") else ""
    if extension in TYPES:
        return TYPES[extension]
    return mimetypes.guess_type(path)[0] or "application/octet-stream"


def file_for(manifest: Manifest, path: str) -> str | None:
    """The build's file a URL path names (module docstring), or None (a 404)."""
    wanted = path.lstrip("/")
    if wanted == "" or wanted.endswith("/"):
        wanted += INDEX
    if wanted in manifest.files:
        return wanted
    last = wanted.rsplit("/", 1)[-1]
    return INDEX if "." not in last and INDEX in manifest.files else None


def cache_control(path: str) -> str:
    """Hashed assets for a year; the rest revalidated on every use."""
    return LONG_CACHE if path.startswith(ASSETS) else REVALIDATE


class PublishedApps:
    """ASGI wrapper serving the apps domain's hosts (module docstring)."""

    def __init__(self, app: ASGIApp, rows: SlugLookup, storage: BuildStorage, domain: str) -> None:
        """Serve ``<slug>.<domain>`` from ``storage``; pass every other host to ``app``."""
        self.app, self.rows, self.storage = app, rows, storage
        self.domain = domain.lower()
        self._manifests: dict[str, Manifest] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve an app's host; pass everything else on."""
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = Headers(scope=scope).get("host", "")
        slug = app_label(host, self.domain)
        if slug is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
        else:
            response = await self.answer(slug, scope)
            await response(scope, receive, send)

    async def answer(self, slug: str, scope: Scope) -> Response:
        """The response to one request of app ``slug``."""
        method = scope["method"]
        if method not in METHODS:
            return _page(405, "Published apps answer GET and HEAD only.", {"allow": "GET, HEAD"})
        manifest = await self._manifest(slug)
        if manifest is None:
            return _page(404, "This link serves no app: it was unpublished, or never existed.")
        path = file_for(manifest, scope["path"])
        if path is None:
            return _page(404, f"The app has no file {html.escape(scope['path'])!s}.")
        entry = manifest.files[path]
        etag = f'"{entry.digest}"'
        headers = {**SAFE_HEADERS, "cache-control": cache_control(path), "etag": etag}
        if etag in _etags(Headers(scope=scope).get("if-none-match", "")):
            return Response(b"", 304, headers)
        data = b"" if method == "HEAD" else await _in_thread(self.storage.blob, entry.digest)
        if data is None:
            return _page(404, "The app's file is no longer stored.")
        headers["content-length"] = str(entry.size)
        return Response(data, 200, headers, media_type=content_type(path))

    async def _manifest(self, slug: str) -> Manifest | None:
        """The manifest ``slug``'s link serves now (the row read each time), or None."""
        publication = await _in_thread(self.rows.publication_by_slug, slug)
        if publication is None or publication.manifest is None:
            return None
        digest = publication.manifest
        manifest = self._manifests.get(digest)
        if manifest is None:
            manifest = await _in_thread(self.storage.manifest, digest)
            if manifest is None:
                return None
            if len(self._manifests) >= MANIFEST_CACHE:
                self._manifests.pop(next(iter(self._manifests)))
            self._manifests[digest] = manifest
        return manifest


def _etags(header: str) -> set[str]:
    """The tags an ``If-None-Match`` names (weak ones compared as strong: files are bytes)."""
    return {tag.strip().removeprefix("W/") for tag in header.split(",") if tag.strip()}


def _page(status: int, reason: str, extra: dict[str, str] | None = None) -> Response:
    headers = {**SAFE_HEADERS, "cache-control": "no-store", **(extra or {})}
    body = NOT_FOUND_PAGE.format(reason=reason)
    return Response(body, status, headers, media_type="text/html; charset=utf-8")


async def _in_thread(fn: Callable[[str], T], argument: str) -> T:
    return await anyio.to_thread.run_sync(fn, argument)
