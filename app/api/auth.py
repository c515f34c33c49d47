"""Who is asking: ``Authorization: Bearer <api token>`` or the UI's ``kiln_session`` cookie.

- :func:`authenticate` finds the user of a request or WebSocket (``None`` if neither credential
  is there or valid); :func:`require_user` answers 401 instead of ``None``.
- ``GET /login?token=<one-time login token>`` (:func:`login`) exchanges the token that
  ``kiln serve`` printed for a session token in an ``HttpOnly``, ``SameSite=Lax`` cookie and
  redirects to ``/``. The login token works once.

A bearer token is an API token (``kiln user create``); the cookie holds a session token. Each is
looked up only as its own kind, so a leaked login link is not an API token.

Cross-site request forgery: a browser attaches the cookie by itself, also to a request a page
of another origin makes (a generated app in a preview, say: previews are the UI's *site*, so
even a ``SameSite`` cookie goes along; a "simple" POST needs no CORS preflight). So a
cookie-authenticated request must come from the UI's own origin: a ``Sec-Fetch-Site`` other
than ``same-origin`` (or ``none``: typed by the person) is refused (403) whatever the method,
and for browsers without Fetch Metadata an unsafe method whose ``Origin`` names another origin
is. Bearer requests are not affected (a browser never adds that header by itself).

Cookie tossing: a preview may set a cookie for the whole site (``Domain=``), which the UI's
host would receive. Where browsers keep Secure cookies (https, ``*.localhost``) the UI's cookie
is ``__Host-kiln_session``, which no other host can set, and only that name is read there.
"""

from __future__ import annotations

import html
from urllib.parse import urlsplit

from starlette.requests import HTTPConnection, Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from app.api.errors import ApiError
from app.api.ports import StorePort, UserRow
from app.api.services import ApiServices, in_thread, services
from sandbox import bind_docker_tenant

SESSION_COOKIE = "kiln_session"
# The name the cookie has where browsers keep Secure cookies: no page of another host (a
# preview, same-site with the UI) can set or shadow a ``__Host-`` cookie (no Domain, Path=/).
HOST_SESSION_COOKIE = f"__Host-{SESSION_COOKIE}"
# What a browser's Fetch Metadata says of a request the UI's own page made (or the person typed).
OWN_FETCH_SITES = frozenset({"same-origin", "none"})
MAX_TOKEN_LENGTH = 256
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def bearer_token(connection: HTTPConnection) -> str | None:
    """The token of an ``Authorization: Bearer`` header, if any."""
    scheme, _, token = connection.headers.get("authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > MAX_TOKEN_LENGTH:
        return None
    return token


def secure_cookies_work(connection: HTTPConnection) -> bool:
    """Whether a browser keeps a ``Secure`` cookie of this request's host: https, or http on
    ``localhost``/``*.localhost``, which browsers treat as secure."""
    host = connection.url.hostname or ""
    return connection.url.scheme == "https" or host == "localhost" or host.endswith(".localhost")


def session_cookie_name(connection: HTTPConnection) -> str:
    """The UI's session cookie on this host: ``__Host-kiln_session`` where Secure cookies work
    (only that one is read there: a plain ``kiln_session`` may have come from a preview)."""
    return HOST_SESSION_COOKIE if secure_cookies_work(connection) else SESSION_COOKIE


def session_token(connection: HTTPConnection) -> str | None:
    """The value of the UI's session cookie (:func:`session_cookie_name`), if any."""
    token = connection.cookies.get(session_cookie_name(connection), "")
    return token if token and len(token) <= MAX_TOKEN_LENGTH else None


async def user_of(store: StorePort, connection: HTTPConnection) -> UserRow | None:
    """The user a connection's bearer token, else its session cookie, belongs to."""
    bearer = bearer_token(connection)
    if bearer is not None:
        return await in_thread(store.user_for_token, bearer, "api")
    cookie = session_token(connection)
    if cookie is not None:
        return await in_thread(store.user_for_token, cookie, "session")
    return None


async def authenticate(connection: HTTPConnection) -> UserRow | None:
    """The user making this request, or ``None``."""
    return await user_of(services(connection).store, connection)


def check_same_origin(connection: HTTPConnection) -> None:
    """403 unless a cookie-authenticated request comes from this very origin: any method when
    the browser says where it came from (``Sec-Fetch-Site``), unsafe ones by ``Origin``."""
    if bearer_token(connection) is not None:
        return
    site = connection.headers.get("sec-fetch-site")
    if site is not None and site.lower() not in OWN_FETCH_SITES:
        source = connection.headers.get("origin") or "a page of another origin"
        raise ApiError(
            403, "cross_origin", f"requests from {source!r} ({site!r}) may not use this session"
        )
    if connection.scope.get("method", "GET") in SAFE_METHODS:
        return
    origin = connection.headers.get("origin")
    if origin is None:
        return  # not a browser's cross-origin request (browsers send Origin on those)
    # Hosts, not schemes: behind a TLS-terminating proxy the page is https, this request http.
    if urlsplit(origin).netloc.lower() != connection.headers.get("host", "").lower():
        raise ApiError(403, "cross_origin", f"requests from {origin!r} may not use this session")


async def require_user(connection: HTTPConnection) -> UserRow:
    """The user making this request; 401 if there is none, 403 for a cross-origin forgery."""
    check_same_origin(connection)
    user = await authenticate(connection)
    if user is None:
        raise ApiError(
            401,
            "unauthenticated",
            "sign in: send 'Authorization: Bearer <token>' or open the login link kiln printed",
        )
    bind_docker_tenant(user.id)  # the request's Docker calls count against this user's share
    return user


def set_session_cookie(
    response: Response,
    token: str,
    max_age: float,
    secure: bool,
    *,
    embedded: bool = False,
    name: str = SESSION_COOKIE,
) -> None:
    """Put a session credential in the ``HttpOnly``, ``SameSite=Lax`` cookie ``name``.

    ``embedded``: ``SameSite=None; Secure; Partitioned`` instead, for a host the UI shows in an
    iframe (the preview), so the cookie also works should the preview be another *site* than
    the UI (a ``KILN_PUBLIC_HOST`` of ``localhost``: ``<id>.preview.localhost`` is another site,
    where a Lax cookie is neither stored nor sent). Browsers take ``Secure`` over http on
    ``*.localhost``.
    """
    if embedded:
        # Written by hand: http.cookies (so Starlette) knows ``Partitioned`` only from 3.14.
        attributes = f"Max-Age={int(max_age)}; Path=/; HttpOnly; SameSite=None; Secure; Partitioned"
        response.headers.append("set-cookie", f"{name}={token}; {attributes}")
        return
    response.set_cookie(
        name, token, max_age=int(max_age), path="/", httponly=True, samesite="lax", secure=secure
    )


async def consume_login(found: ApiServices, token: str | None) -> UserRow:
    """The user of the one-time login ``token``, which is spent now; 401 if it is not valid."""
    user = None
    if token and len(token) <= MAX_TOKEN_LENGTH:
        user = await in_thread(found.store.consume_login_token, token)
    if user is None:
        raise ApiError(
            401,
            "invalid_login_token",
            "this login link is unknown, expired or already used; run `kiln serve` again "
            "or ask for a new link",
        )
    return user


async def new_session(found: ApiServices, user: UserRow) -> str:
    """A fresh session token of ``user``, valid for the configured session lifetime."""
    return await in_thread(found.store.create_token, user.id, "session", found.settings.session_ttl)


def signed_in(redirect_to: str) -> Response:
    """The redirect that ends a sign-in (the caller adds the cookie); never cached."""
    response = RedirectResponse(redirect_to, status_code=303)
    response.headers["cache-control"] = "no-store"
    return response


async def exchange_login_token(found: ApiServices, connection: HTTPConnection) -> Response:
    """Trade the UI's ``?token=`` (one-time) for a ``kiln_session`` cookie and a redirect to
    ``/``; 401 if it is spent. The cookie is host-only: the UI's host."""
    user = await consume_login(found, connection.query_params.get("token"))
    response = signed_in("/")
    secure = secure_cookies_work(connection)
    name = session_cookie_name(connection)
    token = await new_session(found, user)
    set_session_cookie(response, token, found.settings.session_ttl, secure, name=name)
    return response


async def login(request: Request) -> Response:
    """``GET /login?token=``: sign the browser in and go to the UI.

    A browser that opens a spent link gets a page in words; API clients get the JSON error.
    """
    try:
        return await exchange_login_token(services(request), request)
    except ApiError as exc:
        if "text/html" not in request.headers.get("accept", ""):
            raise
        page = _LOGIN_REFUSED_PAGE.replace("{message}", html.escape(exc.message))
        return HTMLResponse(page, status_code=exc.status, headers={"cache-control": "no-store"})


_LOGIN_REFUSED_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kiln: sign-in link not valid</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:system-ui,sans-serif;max-width:34rem;margin:15vh auto;padding:0 1rem;
color:#1f2430}h1{font-size:1.4rem}code{background:#f1f2f5;padding:.1rem .3rem}</style></head>
<body><h1>This sign-in link cannot be used</h1><p>{message}.</p>
<p>Each link works once. Restart <code>kiln serve</code> to print a fresh one.</p></body></html>
"""
