"""What every provider shares when it wraps an SDK failure into kiln's error tree.

Each provider reads its own error body first (an error ``type``, ``code`` or ``status`` says more
than the HTTP status: a streamed error event arrives with status 200, a 400 may mean "context too
long"); this module is the fallback by HTTP status, and the list of transport exceptions the SDKs
let through while a response body is being read (a connection cut mid-stream).

Every provider error leaves the provider's stream through :func:`without_secrets`: an upstream
(a gateway, a test server, a provider's own error text) may quote the key it was sent, and an
error's message is shown and stored (the run's ``error``, its ``error`` and ``run_finished``
events, the reply's data). The key is the user's stored one or the server's environment's,
whichever the provider was built with.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import httpx

from app.errors import (
    AuthError,
    ContextTooLong,
    ModelRefused,
    Overloaded,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
)

REDACTED = "[redacted]"
# A secret shorter than this is no real key (a placeholder): replacing it would garble words.
MIN_SECRET_LENGTH = 8

try:  # the SDKs moved from httpx to its fork httpx2; either may carry a cut connection
    import httpx2

    TRANSPORT_ERRORS: tuple[type[Exception], ...] = (httpx.HTTPError, httpx2.HTTPError)
except ImportError:  # pragma: no cover - older SDKs without httpx2
    TRANSPORT_ERRORS = (httpx.HTTPError,)


def error_for_status(
    provider: str, status: int, detail: str, retry_after: float | None = None
) -> ProviderError:
    """kiln's error for an HTTP ``status`` whose body said nothing more specific."""
    message = f"{provider} answered HTTP {status}: {detail!r}"
    if status in (401, 403):
        return AuthError(message)
    if status == 429:
        return RateLimited(message, retry_after)
    if status in (503, 529):
        return Overloaded(message)
    if status == 404:
        return ModelRefused(message)
    if status == 413:
        return ContextTooLong(message)
    if status >= 500 or status == 408:
        return ProviderUnavailable(message)
    return ProviderError(message)


@contextlib.contextmanager
def sdk_errors(
    provider: str,
    api_error: type[Exception],
    classify: Callable[[Any], ProviderError],
    transport: tuple[type[Exception], ...] = (),
) -> Iterator[None]:
    """Raise an SDK's exceptions as kiln's while the block runs (httpx's ``map_exceptions``).

    ``transport`` names the SDK's own connection errors; they and :data:`TRANSPORT_ERRORS` are
    checked first, because SDKs derive their connection errors from their API error class.
    Every other ``api_error`` goes through the provider's ``classify``.
    """
    try:
        yield
    except (*transport, *TRANSPORT_ERRORS) as exc:
        raise transport_failure(provider, exc) from exc
    except api_error as exc:
        raise classify(exc) from exc


def transport_failure(provider: str, exc: BaseException) -> ProviderUnavailable:
    """The error for a network failure: refused connection, timeout, a stream cut mid-way."""
    detail = str(exc) or type(exc).__name__
    return ProviderUnavailable(f"{provider} connection failed: {detail!r}")


def incomplete_stream(provider: str, marker: str) -> ProviderUnavailable:
    """The error for a stream that ended cleanly on the wire but without its final event."""
    return ProviderUnavailable(f"{provider} stream ended before {marker!r}: the answer is cut")


def without_secrets(error: ProviderError, secrets: Iterable[str | None]) -> ProviderError:
    """``error`` with each of ``secrets`` in its message replaced by :data:`REDACTED` (in
    place: its type and fields, such as ``retry_after``, stay)."""
    kept = [secret for secret in secrets if secret and len(secret) >= MIN_SECRET_LENGTH]
    if kept:
        error.args = tuple(_redacted(arg, kept) for arg in error.args)
    return error


def _redacted(value: object, secrets: list[str]) -> object:
    if not isinstance(value, str):
        return value
    for secret in secrets:
        value = value.replace(secret, REDACTED)
    return value
