"""Signing out: ``POST /api/logout`` ends this browser's session, ``POST /api/me/sessions/revoke``
ends every browser session of the user.

- ``POST /api/logout``: the token of the UI's session cookie (``session_cookie_name``) is deleted
  and the cookie cleared; ``204`` also when there was none or it had expired already (signing
  out twice is no error). A bearer token is not ended: API tokens are revoked with ``kiln user``.
- ``POST /api/me/sessions/revoke`` (signed in): every session of the user ends, the UI's on each
  browser and each preview host's (their cookies hold sessions too), and so do sign-in links not
  used yet; ``200 {revoked: n}``, and this browser's cookie is cleared. API tokens stay.

Both are unsafe methods under the same-origin rule of :mod:`app.api.auth`: a generated app in a
preview cannot sign its user out.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.api.auth import (
    check_same_origin,
    require_user,
    secure_cookies_work,
    session_cookie_name,
    session_token,
)
from app.api.services import in_thread, services


def _signed_out(response: Response, request: Request) -> Response:
    """``response`` with this browser's session cookie cleared; never cached."""
    secure = secure_cookies_work(request)
    name = session_cookie_name(request)
    response.delete_cookie(name, path="/", secure=secure, httponly=True, samesite="lax")
    response.headers["cache-control"] = "no-store"
    return response


async def logout(request: Request) -> Response:
    """``POST /api/logout``: end this browser's session and clear its cookie."""
    check_same_origin(request)
    token = session_token(request)
    if token is not None:
        await in_thread(services(request).store.revoke_token, token, "session")
    return _signed_out(Response(status_code=204), request)


async def revoke_sessions(request: Request) -> Response:
    """``POST /api/me/sessions/revoke``: end every browser session of the user."""
    user = await require_user(request)
    revoked = await in_thread(services(request).store.revoke_sessions, user.id)
    return _signed_out(JSONResponse({"revoked": revoked}), request)


ROUTES = [
    Route("/api/logout", logout, methods=["POST"]),
    Route("/api/me/sessions/revoke", revoke_sessions, methods=["POST"]),
]
