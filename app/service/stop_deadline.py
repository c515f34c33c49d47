"""The bound on a stop of ``kiln serve``: the process is gone within ``KILN_STOP_LIMIT`` seconds
(15 by default) of the first SIGINT/SIGTERM, whatever it was doing.

The orderly stop (kiln serve's module docstring: the HTTP server, the runs, parking, Redis)
takes 1-3 s at low load; every stage has a bound of its own (event streams end at once, the
HTTP server's graceful part :data:`app.service.http_server.GRACEFUL_SHUTDOWN_SECONDS`, parking
what is left of the limit but at most ``PARK_LIMIT_SECONDS``). What no stage bounds (work
shielded from cancellation, a thread stuck in a blocking call, a bug) is met by a watchdog
*thread*, since the event loop may be the thing that is stuck: at the limit it logs the stage
the stop was in, stops the embedded redis-server (a session of its own: it would outlive kiln)
and ends the process with ``os._exit`` (no thread joins, no atexit handlers to wait for).
The next start's reaper parks whatever was left running. A second signal does the same at once:
that is what a second Ctrl+C means.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)
EXIT_FORCED = 1


class StopDeadline:
    """Started at the first signal; ends the process if the stop outlasts ``limit``."""

    def __init__(self, limit: float) -> None:
        """``limit``: seconds from the first signal to the end of the process
        (``KILN_STOP_LIMIT``)."""
        self.limit = limit
        self._last_resorts: list[Callable[[], None]] = []
        self._started_at: float | None = None
        self._stage = "stopping the HTTP server"
        self._lock = threading.Lock()
        self._ended = False

    def begin(self) -> None:
        """Start the clock (once): the process ends at the limit unless it exits before."""
        if self._started_at is not None:
            return
        self._started_at = time.monotonic()
        timer = threading.Timer(self.limit, self.expire, args=(f"{self.limit:g} s passed",))
        timer.daemon = True  # the process may exit normally before it fires
        timer.name = "kiln-stop-deadline"
        timer.start()

    @property
    def started(self) -> bool:
        """Whether a stop is under way."""
        return self._started_at is not None

    def remaining(self) -> float:
        """Seconds left before the process is ended (the whole limit before :meth:`begin`)."""
        if self._started_at is None:
            return self.limit
        return max(0.0, self._started_at + self.limit - time.monotonic())

    def stage(self, name: str) -> None:
        """Name the stage the stop is in now (the forced exit's log line says it)."""
        self._stage = name

    def last_resort(self, action: Callable[[], None]) -> None:
        """Call ``action`` (from the watchdog thread) before a forced exit."""
        self._last_resorts.append(action)

    def expire(self, why: str) -> None:
        """End the process now (from any thread): the last resorts, a log line, ``os._exit``."""
        with self._lock:
            if self._ended:
                return
            self._ended = True
        for action in self._last_resorts:
            try:
                action()
            except Exception:  # one failed resort must not keep the process alive
                log.exception("a last resort of the forced stop failed")
        log.error(
            "stopped at once (%s) while %s; the next start parks what is left", why, self._stage
        )
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # a closed pipe: nobody reads it
                stream.flush()
        os._exit(EXIT_FORCED)
