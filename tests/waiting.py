"""Polling under a deadline, the one way tests wait for something that happens elsewhere.

Both helpers poll a condition and raise :class:`TimeoutError` naming what was awaited once the
deadline passed: the deadline guards against hanging (the machine may be loaded), it is never a
speed assertion.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio

DEFAULT_LIMIT_SECONDS = 10.0


def wait_until(
    condition: Callable[[], bool],
    what: str,
    limit: float = DEFAULT_LIMIT_SECONDS,
    interval: float = 0.01,
) -> None:
    """Poll ``condition`` every ``interval`` s until it holds; raise naming ``what`` if it
    does not within ``limit`` s."""
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        time.sleep(interval)


async def until(
    condition: Callable[[], bool],
    what: str = "the condition",
    limit: float = DEFAULT_LIMIT_SECONDS,
    interval: float = 0.01,
) -> None:
    """The event-loop twin of :func:`wait_until`: sleeps with ``anyio.sleep`` between polls."""
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        await anyio.sleep(interval)
