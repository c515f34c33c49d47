"""Context managers and callbacks entered one after another, left as nested ``async with``
statements are: kiln's stand-in for :class:`contextlib.AsyncExitStack`.

Why not the standard one: ``AsyncExitStack.__aexit__`` rewrites the ``__context__`` of what a
callback raises (``_fix_exception_context``) and, when a callback re-raises the very exception it
was handed (anyio's task group does: ``raise exc_val``) while another exception is being handled
further up (a run's ``finally`` closing its sandbox while a stop's cancellation goes by), it sets
that exception's ``__context__`` to itself. The next stack that walks the chain loops forever:
``kiln serve`` stopped mid-run never exited and spun a core (kiln issue 24;
python/cpython#102201, python-trio/trio#2577).

Here nothing assigns ``__context__``: each exit runs, as in nested statements, inside the handler
of what the inner ones raised, so Python chains exceptions itself (and refuses cycles when it
does). One difference is left on purpose: an exception the block raised and an inner exit
suppressed is still being handled while the outer exits run, so it stays the context of what
they raise (nested statements would drop it; dropping it here means assigning ``__context__``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import TypeVar

T = TypeVar("T")
Exit = Callable[
    [type[BaseException] | None, BaseException | None, TracebackType | None],
    Awaitable[bool | None],
]


class NestedExits:
    """Enter context managers (and register callbacks) now; :meth:`aclose` or the ``async
    with`` block's end leaves them last to first, each seeing what the inner ones raised."""

    def __init__(self) -> None:
        self._exits: list[Exit] = []

    async def enter_async_context(self, manager: AbstractAsyncContextManager[T]) -> T:
        """Enter ``manager``; it is left with the others."""
        value = await manager.__aenter__()
        self._exits.append(manager.__aexit__)
        return value

    def push_async_callback(self, callback: Callable[[], Awaitable[object]]) -> None:
        """Await ``callback()`` when leaving (an exception passing by goes on after it)."""

        async def leave(*_details: object) -> bool:
            await callback()
            return False

        self._exits.append(leave)

    def callback(self, callback: Callable[[], object]) -> None:
        """Call ``callback()`` when leaving (an exception passing by goes on after it)."""

        async def leave(*_details: object) -> bool:
            callback()
            return False

        self._exits.append(leave)

    async def aclose(self) -> None:
        """Leave everything entered so far, as if the block ended normally."""
        await self.__aexit__(None, None, None)

    async def __aenter__(self) -> NestedExits:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        exits, self._exits = self._exits, []
        return await _unwind(exits, exc)


async def _unwind(exits: list[Exit], exc: BaseException | None) -> bool:
    """Call ``exits`` from the last, each with the exception still going (``exc`` at first);
    whether ``exc`` ended suppressed. An exception an exit raises goes to the outer ones from
    inside its handler, as in nested statements."""
    pending = exc
    while exits:
        leave = exits.pop()
        try:
            if await leave(*_details(pending)):
                pending = None
        except BaseException as raised:
            if await _unwind(exits, raised):
                return exc is not None
            raise
    return exc is not None and pending is None


def _details(
    exc: BaseException | None,
) -> tuple[type[BaseException] | None, BaseException | None, TracebackType | None]:
    if exc is None:
        return None, None, None
    return type(exc), exc, exc.__traceback__
