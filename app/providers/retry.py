"""kiln's retry policy for provider streams, and reading a provider's ``Retry-After``.

The SDKs' own retries are switched off (``max_retries=0``, one attempt for google-genai), so this
is the only retry policy, and :class:`~app.providers.base.ProviderStream` applies it only to
failures before the first token.

Which failures are retried: :class:`~app.errors.RateLimited`, :class:`~app.errors.Overloaded` and
:class:`~app.errors.ProviderUnavailable`. Never retried: a refused key, a request too long for the
context window, a refused model, or any other provider error (retrying would fail the same way).

How long to wait before attempt ``n + 1``: the provider's ``retry_after`` when it gave one (plus
up to ``jitter`` of it on top, never less), else ``base_delay * 2**(n-1)`` capped at ``max_delay``
with ``± jitter`` spread, so that many runs hit by the same outage do not come back in step. A
``retry_after`` longer than ``max_retry_after`` is not waited for: holding a run for minutes is
worse than telling the user, so the :class:`~app.errors.RateLimited` is raised at once.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from app.errors import Overloaded, ProviderError, ProviderUnavailable, RateLimited

_RETRYABLE: tuple[type[ProviderError], ...] = (RateLimited, Overloaded, ProviderUnavailable)


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded, jittered back-off for failures before the first token."""

    max_attempts: int = 4
    base_delay: float = 1.0
    max_delay: float = 20.0
    max_retry_after: float = 60.0
    jitter: float = 0.25
    random_fraction: Callable[[], float] = field(default=random.random, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, not {self.max_attempts!r}")
        if not 0 <= self.jitter < 1:
            raise ValueError(f"jitter must be in [0, 1), not {self.jitter!r}")

    def delay_before_retry(self, error: ProviderError, attempts_made: int) -> float | None:
        """Seconds to wait before another attempt after ``error``, or ``None`` to give up."""
        if not isinstance(error, _RETRYABLE) or attempts_made >= self.max_attempts:
            return None
        retry_after = error.retry_after if isinstance(error, RateLimited) else None
        if retry_after is not None:
            if retry_after > self.max_retry_after:
                return None
            return retry_after * (1 + self.jitter * self.random_fraction())
        backoff = min(self.max_delay, self.base_delay * 2.0 ** (attempts_made - 1))
        return backoff * (1 + self.jitter * (2 * self.random_fraction() - 1))


def retry_after_seconds(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The wait a response asks for: ``retry-after-ms``, else ``retry-after`` (seconds or date)."""
    millis = _number(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _number(value)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def _number(value: str | None) -> float | None:
    """``value`` as a non-negative finite number, or ``None``."""
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    if number != number or number in (float("inf"), float("-inf")) or number < 0:
        return None
    return number
