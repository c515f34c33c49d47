"""JSON errors: ``{"error": {"code", "message", ...}}`` with the right status, never a traceback.

- Handlers raise :class:`ApiError` (status, stable code, human message, optional extra fields
  such as admission's ``limit``).
- kiln's own exceptions are mapped here (:func:`status_for`, codes from
  :func:`app.errors.error_code`), so a handler can let ``AdmissionRefused`` or ``ModelRefused``
  through and the client still gets a precise answer.
- :class:`RequestContext` (pure ASGI, the outermost middleware) gives every request an id
  (``X-Request-Id``, also put in the log context) and turns anything unexpected into a 500 whose
  body names only the request id; the traceback goes to the server's log with that id.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import (
    AdmissionRefused,
    BudgetExceeded,
    ConfigError,
    ContextTooLong,
    ImageRefused,
    KilnError,
    ModelRefused,
    ProviderError,
    error_code,
)
from app.logs import log_context
from app.runs.errors import InvalidRunRequest, QueueUnavailable, RunFinished, RunNotFound
from app.store import StoreConflict, StoreError
from parser.errors import ParseError
from sandbox import CommandRefused, InstallRefused, SandboxError

log = logging.getLogger(__name__)
REQUEST_ID_HEADER = "x-request-id"
INTERNAL_TROUBLE = "the service failed ({code}); the server log has request {request_id!r}"


class ApiError(KilnError):
    """An error answer: HTTP ``status``, stable ``code``, a message, optional extra fields."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra


def not_found(kind: str, identifier: str) -> ApiError:
    """The 404 for a resource that does not exist *or belongs to someone else*."""
    return ApiError(404, "not_found", f"no {kind} {identifier!r}")


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    """The JSON error body with ``status``."""
    return JSONResponse({"error": {"code": code, "message": message, **extra}}, status, headers)


_STATUSES: tuple[tuple[type[BaseException], int], ...] = (
    (AdmissionRefused, 429),
    (RunNotFound, 404),
    (RunFinished, 409),
    (InvalidRunRequest, 400),
    (QueueUnavailable, 503),
    (ModelRefused, 400),
    (ImageRefused, 422),
    (ContextTooLong, 422),
    (BudgetExceeded, 422),
    (ConfigError, 400),
    (ProviderError, 502),
    (ParseError, 400),
    (CommandRefused, 400),
    (InstallRefused, 400),
    (SandboxError, 503),
    (StoreConflict, 409),
    (StoreError, 503),
)
# Their messages name internals (docker calls, database files): the client gets a pointer to
# the server's log instead.
_INTERNAL_DETAIL = (SandboxError, StoreError, QueueUnavailable)


def status_for(exc: BaseException) -> int:
    """The HTTP status for one of kiln's exceptions (500 for anything else)."""
    for kind, status in _STATUSES:
        if isinstance(exc, kind):
            return status
    return 500


async def api_error_handler(request: Request, exc: Exception) -> Response:
    """Starlette handler for :class:`ApiError`."""
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.code, exc.message, **exc.extra)


async def http_exception_handler(request: Request, exc: Exception) -> Response:
    """Starlette's own 404/405 (no route, wrong method) in kiln's JSON shape."""
    assert isinstance(exc, HTTPException)
    codes = {404: "not_found", 405: "method_not_allowed"}
    message = exc.detail if exc.status_code != 404 else f"no route {request.url.path!r}"
    code = codes.get(exc.status_code, "http_error")
    headers = dict(exc.headers or {})
    return error_response(exc.status_code, code, message, headers)


async def kiln_error_handler(request: Request, exc: Exception) -> Response:
    """kiln's exceptions: the status from :func:`status_for`, the code from ``error_code``."""
    status, code = status_for(exc), error_code(exc)
    if status >= 500 and (status == 500 or isinstance(exc, _INTERNAL_DETAIL)):
        log.warning("%s: %s", code, exc, exc_info=exc)
        message = INTERNAL_TROUBLE.format(code=code, request_id=request_id(request.scope))
        return error_response(status, code, message)
    extra: dict[str, Any] = {"limit": exc.limit} if isinstance(exc, AdmissionRefused) else {}
    retry_after = getattr(exc, "retry_after", None)
    headers = {"Retry-After": str(retry_after)} if isinstance(retry_after, int) else None
    return error_response(status, code, str(exc), headers, **extra)


def internal_error_response(identifier: str) -> JSONResponse:
    """The 500 body: it names the request id, never the exception."""
    message = f"internal error; the server log has request {identifier!r}"
    return error_response(500, "internal_error", message)


async def unexpected_error_handler(request: Request, exc: Exception) -> Response:
    """Starlette's last-resort handler: the JSON 500 (the traceback is logged by
    :class:`RequestContext`, which sees the exception re-raised after this answer)."""
    return internal_error_response(request_id(request.scope))


EXCEPTION_HANDLERS = {
    Exception: unexpected_error_handler,
    ApiError: api_error_handler,
    HTTPException: http_exception_handler,
    KilnError: kiln_error_handler,
    ParseError: kiln_error_handler,
    SandboxError: kiln_error_handler,
}


def request_id(scope: Scope) -> str:
    """The id :class:`RequestContext` gave this request ("-" outside of one)."""
    state = scope.get("state") or {}
    value = state.get("request_id", "-")
    return str(value)


class RequestContext:
    """Outermost middleware: request ids, and a JSON 500 (logged) for any unhandled error."""

    def __init__(self, app: ASGIApp) -> None:
        """Wrap ``app``."""
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the request with an id in scope; never let an exception reach the server."""
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        identifier = secrets.token_hex(8)
        scope.setdefault("state", {})["request_id"] = identifier
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                MutableHeaders(scope=message).append(REQUEST_ID_HEADER, identifier)
            await send(message)

        with log_context(request_id=identifier):
            try:
                await self.app(scope, receive, send_with_id)
            except Exception:
                # The id goes on the record itself: a handler may format it after the request.
                log.exception(
                    "unhandled error in %s %s",
                    scope.get("method"),
                    scope["path"],
                    extra={"request_id": identifier},
                )
                if scope["type"] == "http" and not started:
                    await internal_error_response(identifier)(scope, receive, send_with_id)
