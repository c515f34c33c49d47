"""Who may put kiln's pages in a frame: nobody may frame the UI, only the UI may frame a preview.

:class:`FramingHeaders` adds ``Content-Security-Policy: frame-ancestors`` to every HTTP response
(the dev server's own policy, if any, still applies too: a browser enforces each one):

- the UI and the API (any host but a preview host): ``'none'``, plus ``X-Frame-Options: DENY``
  for browsers without CSP. A preview must not be able to frame the UI and click through it;
- a preview host: the UI's origin only (:func:`ui_source`), so another site cannot frame the
  preview with the user's preview cookie in it.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.services import ApiSettings
from sandbox import preview_label

CSP = "content-security-policy"


def ui_source(settings: ApiSettings) -> str:
    """The UI's origin as a CSP source (``localhost:8000``): a host-source without a scheme
    matches the scheme the preview itself is served with (http, or https behind TLS)."""
    host = settings.public_host
    return host if settings.public_port in (None, 80, 443) else f"{host}:{settings.public_port}"


class FramingHeaders:
    """ASGI wrapper adding the framing policy of the response's host (module docstring)."""

    def __init__(self, app: ASGIApp, settings: ApiSettings) -> None:
        """Wrap ``app``; the UI's origin comes from ``settings``."""
        self.app = app
        self.preview_policy = f"frame-ancestors {ui_source(settings)}"
        self.public_host = settings.public_host

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; add the headers to the response's start."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        preview = preview_label(host, self.public_host) is not None

        async def send_framed(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if preview:
                    headers.append(CSP, self.preview_policy)
                else:
                    headers.append(CSP, "frame-ancestors 'none'")
                    headers["x-frame-options"] = "DENY"
            await send(message)

        await self.app(scope, receive, send_framed)
