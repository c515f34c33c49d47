"""Whether a sandbox's resident builder is warm, as far as this process can tell (issue 24
item 5), so that a warm-up request it would ignore is not sent.

The builder (images/vite-react/kiln-build-service.mjs) stays warm after a build or a warm-up
until it has been idle for its ``IDLE_MS`` (180 s) or the installed packages change; asked to
warm up then, it does nothing, but the request costs a ``docker exec`` and a Node start in the
sandbox while the answer streams (each follow-up turn asks once). So a warm-up is skipped when
this process had the same container's builder build or warm up less than
:data:`WARM_FOR_SECONDS` ago and ran no install or command there since (either may change the
packages). A wrong guess costs only speed: the build then starts the builder itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["WARM_FOR_SECONDS", "BuilderWarmth"]

# Under the builder service's IDLE_MS (180 s), counted from the request's answer, not the end of
# the warm-up it started: the builder outlives this by a margin.
WARM_FOR_SECONDS = 150.0


class BuilderWarmth:
    """The last builder request per sandbox: its container and when it was answered."""

    __slots__ = ("_clock", "_used")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        """Tell time with ``clock`` (seconds, monotonic)."""
        self._clock = clock
        self._used: dict[str, tuple[str, float]] = {}

    def used(self, sandbox_id: str, container_id: str) -> None:
        """The builder in ``container_id`` built or warmed up just now."""
        self._used[sandbox_id] = (container_id, self._clock())

    def is_warm(self, sandbox_id: str, container_id: str) -> bool:
        """Whether the builder in ``container_id`` is still warm from its last request."""
        last = self._used.get(sandbox_id)
        if last is None or last[0] != container_id:
            return False  # never asked, or the container was replaced (a new builder)
        return self._clock() - last[1] < WARM_FOR_SECONDS

    def forget(self, sandbox_id: str) -> None:
        """The sandbox's packages may change (an install or a command), or it is gone."""
        self._used.pop(sandbox_id, None)
