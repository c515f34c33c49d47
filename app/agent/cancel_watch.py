"""A run's cancel: the provider stream sees the event itself; sandbox and tool work awaited at
that moment is interrupted at once by :meth:`CancelWatch.cancellable`."""

from __future__ import annotations

from collections.abc import Awaitable

import anyio


class CancelWatch:
    """Interrupts the work a run awaits when ``cancel`` is set; run :meth:`watch` in a task."""

    def __init__(self, cancel: anyio.Event) -> None:
        """Watch ``cancel``."""
        self.cancel = cancel
        self._active: anyio.CancelScope | None = None

    async def watch(self) -> None:
        """Wait for the cancel, then interrupt the work awaited now (if any)."""
        await self.cancel.wait()
        if self._active is not None:
            self._active.cancel()

    async def cancellable(self, work: Awaitable[None]) -> None:
        """Await sandbox or tool work that a cancel must interrupt at once."""
        with anyio.CancelScope() as self._active:
            if self.cancel.is_set():
                self._active.cancel()
            await work
        self._active = None
