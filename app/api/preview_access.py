"""Who may see a preview, and where it lives: the gate in front of ``sandbox.preview.proxy``.

:class:`PreviewGate` wraps :class:`~sandbox.preview.proxy.PreviewProxy` (which wraps the API app).
For a request to ``<id>.preview.<public host>`` it:

1. answers ``GET /__kiln/login?token=<sealed login token>`` itself: the link (from
   ``POST /api/sandboxes/{id}/preview-login``) is exchanged for a ``kiln_preview`` cookie on
   *this* host and the browser is redirected to ``/``. A cookie of the UI's host is never sent
   to a preview host (``localhost`` is a top-level domain to browsers, so ``Domain=`` cannot
   share it). The link's token and the cookie's session are sealed to this sandbox
   (:mod:`app.api.preview_seal`): the link signs in nothing else (not the UI: a generated app
   could send the top window there), and the cookie is no API credential;
2. checks the caller (bearer token or ``kiln_preview`` cookie) owns the sandbox's chat. No
   credentials: 401; someone else's or an unknown sandbox: 404, as everywhere in the API (the
   proxy itself would say 403). An admitted connection is marked in its scope, and the proxy's
   ``authorize`` (:func:`marked_authorize`) accepts exactly the marked sandbox;
3. lets the proxy forward it, resolving the dev server with :func:`sandbox_resolver`. No kiln
   credential reaches the dev server (it runs generated code): the proxy strips kiln's cookies
   (:data:`PRIVATE_COOKIES`) from requests and refuses to pass on a ``Set-Cookie`` of theirs,
   and this gate drops the ``Authorization`` header when it carried kiln's bearer token.
"""

from __future__ import annotations

from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.auth import (
    HOST_SESSION_COOKIE,
    SESSION_COOKIE,
    bearer_token,
    consume_login,
    new_session,
    secure_cookies_work,
    set_session_cookie,
    signed_in,
)
from app.api.errors import ApiError, error_response
from app.api.ownership import find_owned_sandbox
from app.api.ports import SandboxesPort, UserRow
from app.api.preview_seal import LOGIN, SESSION
from app.api.services import ApiServices, in_thread
from sandbox import (
    SANDBOX_ID,
    WS_NOT_FOUND,
    WS_POLICY_VIOLATION,
    Refusal,
    Resolve,
    SandboxNotFound,
    preview_label,
    refuse,
)

PREVIEW_LOGIN_PATH = "/__kiln/login"
SCOPE_MARK = "kiln.preview_sandbox"
PREVIEW_COOKIE = "kiln_preview"
# Kiln's cookies: never sent to a dev server, never set by one.
PRIVATE_COOKIES = (SESSION_COOKIE, HOST_SESSION_COOKIE, PREVIEW_COOKIE)
MAX_SEALED_LENGTH = 512


def sandbox_resolver(sandboxes: SandboxesPort) -> Resolve:
    """``resolve`` for the proxy: the sandbox's current dev server URL, ``None`` if unknown."""

    async def resolve(sandbox_id: str) -> str | None:
        try:
            sandbox = await sandboxes.get(sandbox_id)
        except SandboxNotFound:
            return None
        return sandbox.dev_url

    return resolve


async def marked_authorize(connection: HTTPConnection, sandbox_id: str) -> bool:
    """``authorize`` for the proxy: only a connection :class:`PreviewGate` admitted for it."""
    return bool(connection.scope.get(SCOPE_MARK) == sandbox_id)


class PreviewGate:
    """ASGI wrapper around the preview proxy (see the module docstring)."""

    def __init__(self, proxy: ASGIApp, found: ApiServices) -> None:
        """``proxy`` handles every host; this gate only looks at preview hosts."""
        self.proxy = proxy
        self.services = found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Gate preview-host connections; pass everything else through untouched."""
        if scope["type"] not in ("http", "websocket"):
            await self.proxy(scope, receive, send)
            return
        connection = HTTPConnection(scope)
        label = preview_label(
            connection.headers.get("host", ""), self.services.settings.public_host
        )
        if label is None or not SANDBOX_ID.fullmatch(label):
            await self.proxy(scope, receive, send)  # the proxy answers malformed labels
            return
        if scope["type"] == "http" and scope["path"] == PREVIEW_LOGIN_PATH:
            await self._login(scope, receive, send, label)
            return
        refusal = await self._check(connection, label)
        if refusal is not None:
            if scope["type"] == "websocket":
                await receive()  # the client's websocket.connect, answered by refuse()
            await refuse(scope, receive, send, refusal)
            return
        scope[SCOPE_MARK] = label
        if bearer_token(connection) is not None:
            # It was kiln's API token: the dev server runs generated code and must not see it.
            scope["headers"] = [(k, v) for k, v in scope["headers"] if k != b"authorization"]
        await self.proxy(scope, receive, send)

    async def _check(self, connection: HTTPConnection, sandbox_id: str) -> Refusal | None:
        user = await self._user(connection, sandbox_id)
        if user is None:
            message = f"sign in to see the preview of sandbox {sandbox_id!r}"
            return Refusal(401, "unauthenticated", message, WS_POLICY_VIOLATION)
        owned = await find_owned_sandbox(
            self.services.store, self.services.sandboxes, user.id, sandbox_id
        )
        if owned is None:
            return Refusal(404, "not_found", f"no sandbox {sandbox_id!r}", WS_NOT_FOUND)
        return None

    async def _user(self, connection: HTTPConnection, sandbox_id: str) -> UserRow | None:
        """The user of kiln's bearer token, else of this sandbox's sealed preview cookie."""
        store = self.services.store
        bearer = bearer_token(connection)
        if bearer is not None:
            return await in_thread(store.user_for_token, bearer, "api")
        session = self._open(SESSION, sandbox_id, connection.cookies.get(PREVIEW_COOKIE))
        return (
            None if session is None else await in_thread(store.user_for_token, session, "session")
        )

    async def _login(self, scope: Scope, receive: Receive, send: Send, sandbox_id: str) -> None:
        connection = HTTPConnection(scope)
        found = self.services
        try:
            token = self._open(LOGIN, sandbox_id, connection.query_params.get("token"))
            user = await consume_login(found, token)
        except ApiError as exc:
            await error_response(exc.status, exc.code, exc.message)(scope, receive, send)
            return
        cookie = found.seal.seal(SESSION, sandbox_id, await new_session(found, user))
        response = signed_in("/")
        secure, embedded = connection.url.scheme == "https", secure_cookies_work(connection)
        ttl = found.settings.session_ttl
        set_session_cookie(response, cookie, ttl, secure, embedded=embedded, name=PREVIEW_COOKIE)
        await response(scope, receive, send)

    def _open(self, purpose: str, sandbox_id: str, sealed: str | None) -> str | None:
        if not sealed or len(sealed) > MAX_SEALED_LENGTH:
            return None
        return self.services.seal.open(purpose, sandbox_id, sealed)
