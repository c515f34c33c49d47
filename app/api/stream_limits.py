"""How many event streams (SSE) one user may hold open in this process.

An open stream costs a task, a store poll every few seconds and a share of the process's
pub/sub fan-out; without a limit one user's hundreds of tabs (or a script) starve everybody
else. Beyond the limit a new stream is refused with 429 and ``Retry-After``, in words; closing
a stream frees its place at once.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterator

from app.errors import AdmissionRefused

RETRY_AFTER_SECONDS = 5


class StreamLimits:
    """Counts open streams per user and refuses one past ``per_user``."""

    def __init__(self, per_user: int) -> None:
        """Allow ``per_user`` open streams to each user."""
        self.per_user = per_user
        self._open: collections.Counter[str] = collections.Counter()

    def open_for(self, user_id: str) -> int:
        """How many streams ``user_id`` holds open now."""
        return self._open[user_id]

    @contextlib.contextmanager
    def held(self, user_id: str) -> Iterator[None]:
        """Hold one of ``user_id``'s places while the block runs; refuse when none is free."""
        if self._open[user_id] >= self.per_user:
            raise AdmissionRefused(
                f"you have {self.per_user} live event streams open, the most one user may;"
                " close one (a browser tab watching a run) and try again",
                "event_streams",
                retry_after=RETRY_AFTER_SECONDS,
            )
        self._open[user_id] += 1
        try:
            yield
        finally:
            self._open[user_id] -= 1
            if self._open[user_id] <= 0:
                del self._open[user_id]
