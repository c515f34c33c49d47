"""One address for the UI: a page asked for by another name is sent to the public one.

The UI works at ``KILN_PUBLIC_HOST`` only: its previews are ``<id>.preview.<public host>``, the
same *site*, which is what lets the app in the preview pane keep its storage (a browser that
blocks third-party storage blocks it in a frame of another site), and a preview's
``frame-ancestors`` names that one origin. Opened as ``127.0.0.1:8000`` or ``localhost:8000``
the UI would show a preview pane the browser refuses. So :class:`CanonicalHost`, for any host
that is neither the public host nor one of its previews:

- a page a browser navigates to (``Sec-Fetch-Mode: navigate``, ``GET``/``HEAD`` outside
  ``/api/`` and ``/healthz``) is a ``307`` to the same path and query on the public address,
  with a short page in words (a sign-in link keeps its token);
- except when the public host is a ``*.localhost`` name and the request names another machine
  (a LAN address, say): the browser would resolve ``*.localhost`` to its *own* machine, so it
  gets a page in words (``421``) saying which setting to change instead of a redirect;
- the API, ``/healthz``, WebSockets and whatever is not a browser's navigation answer on any
  host: API clients and scripts use the listening address.
"""

from __future__ import annotations

import html
import ipaddress

from starlette.responses import HTMLResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.framing import ui_source
from app.api.services import ApiSettings
from sandbox import host_name, preview_label

ANY_HOST_PATHS = ("/api/", "/healthz")
PAGE_METHODS = frozenset({"GET", "HEAD"})

MOVED_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kiln is at {address}</title>
<style>body{{font:16px system-ui,sans-serif;max-width:36rem;margin:15vh auto;padding:0 1rem;
color:#1f2430}}code{{background:#f1f2f5;padding:.1rem .3rem}}</style></head>
<body><h1>kiln is at <a href="{target}">{address}</a></h1>
<p>{reason}</p></body></html>
"""
MOVED_REASON = (
    "You opened it as <code>{asked}</code>. The app previews and the sign-in work only at kiln's "
    "own address, so your browser is taken there now."
)
ELSEWHERE_REASON = (
    "You opened it as <code>{asked}</code>, but <code>{public}</code> is a name of the machine "
    "your browser runs on, not of kiln's. Set <code>KILN_PUBLIC_HOST</code> to a name of kiln's "
    "machine that your browser can reach (previews are then at "
    "<code>&lt;id&gt;.preview.&lt;that name&gt;</code>) and restart <code>kiln serve</code>."
)


def is_local_name(name: str) -> bool:
    """Whether a host name always means the browser's own machine (``*.localhost``, loopback)."""
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def previews_share_its_site(public_host: str) -> bool:
    """Whether ``<id>.preview.<public_host>`` is the same site as ``public_host``: not for a
    single label (``localhost``: its previews' site is ``preview.localhost``) nor an address."""
    try:
        ipaddress.ip_address(public_host.strip("[]"))
    except ValueError:
        return "." in public_host.strip(".")
    return False


class CanonicalHost:
    """ASGI wrapper sending pages on other hosts to the public address (module docstring)."""

    def __init__(self, app: ASGIApp, settings: ApiSettings) -> None:
        """Wrap ``app``; the public address comes from ``settings``."""
        self.app = app
        self.public_host = settings.public_host.lower()
        self.address = ui_source(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a page on a foreign host; pass everything else on."""
        if not self._foreign_page(scope):
            await self.app(scope, receive, send)
            return
        asked = host_name(dict(scope["headers"]).get(b"host", b"").decode("latin-1"))
        response = self._answer(scope, asked)
        await response(scope, receive, send)

    def _foreign_page(self, scope: Scope) -> bool:
        if scope["type"] != "http" or scope["method"] not in PAGE_METHODS:
            return False
        if scope["path"].startswith(ANY_HOST_PATHS):
            return False
        headers = dict(scope["headers"])
        if headers.get(b"sec-fetch-mode", b"").lower() != b"navigate":
            return False
        host = headers.get(b"host", b"").decode("latin-1")
        if host_name(host) == self.public_host:
            return False
        return preview_label(host, self.public_host) is None

    def _answer(self, scope: Scope, asked: str) -> HTMLResponse:
        scheme = "https" if scope.get("scheme") == "https" else "http"
        query = scope.get("query_string", b"").decode("latin-1")
        path = scope.get("raw_path", scope["path"].encode()).decode("latin-1")
        target = f"{scheme}://{self.address}{path}" + (f"?{query}" if query else "")
        public_is_local = is_local_name(self.public_host)
        moved = not public_is_local or is_local_name(asked)
        reason = (MOVED_REASON if moved else ELSEWHERE_REASON).format(
            asked=html.escape(asked), public=html.escape(self.public_host)
        )
        page = MOVED_PAGE.format(
            address=html.escape(f"{scheme}://{self.address}/"),
            target=html.escape(target if moved else f"{scheme}://{self.address}/"),
            reason=reason,
        )
        headers = {"cache-control": "no-store"}
        if not moved:
            return HTMLResponse(page, status_code=421, headers=headers)
        headers["location"] = target
        return HTMLResponse(page, status_code=307, headers=headers)
