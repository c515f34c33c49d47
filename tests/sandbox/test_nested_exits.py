"""NestedExits leaves what it entered exactly as nested ``async with`` statements would (order,
what each exit sees, suppression, the exception that comes out and its ``__context__`` chain),
and never makes a ``__context__`` cycle: the cycle ``contextlib.AsyncExitStack`` made when
closed in a ``finally`` during a stop hung ``kiln serve`` (kiln issue 24)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType

import anyio
import pytest

from sandbox.nested_exits import NestedExits

pytestmark = pytest.mark.anyio
Body = Callable[[], Awaitable[None]]


class Labelled(Exception):
    """An exception told apart by its label."""


class Exit(AbstractAsyncContextManager[None]):
    """A context manager whose exit logs what it saw, then passes, suppresses, raises a new
    exception or raises again the one it was handed (as anyio's task group does)."""

    def __init__(self, name: str, behaviour: str, log: list[str]) -> None:
        self.name, self.behaviour, self.log = name, behaviour, log

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        self.log.append(f"{self.name} saw {label(exc)}")
        await anyio.lowlevel.checkpoint()
        if self.behaviour == "raise":
            raise Labelled(self.name)
        if self.behaviour == "reraise" and exc is not None:
            raise exc
        return self.behaviour == "suppress"


def label(exc: BaseException | None) -> str:
    return "nothing" if exc is None else str(exc)


def context_chain(exc: BaseException) -> list[str]:
    """The labels along ``__context__``; fails on a cycle instead of looping."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None:
        assert all(current is not other for other in seen), f"__context__ cycle: {seen!r}"
        seen.append(current)
        current = current.__context__
    return [label(item) for item in seen]


async def with_statements(managers: Sequence[Exit], body: Body) -> None:
    if not managers:
        await body()
        return
    async with managers[0]:
        await with_statements(managers[1:], body)


async def with_nested_exits(managers: Sequence[Exit], body: Body) -> None:
    async with NestedExits() as exits:
        for manager in managers:
            await exits.enter_async_context(manager)
        await body()


async def outcome(
    run: Callable[[Sequence[Exit], Body], Awaitable[None]],
    behaviours: Sequence[str],
    body_raises: bool,
    while_handling: bool,
) -> tuple[list[str], list[str]]:
    """What the exits saw and the chain of what came out, for one way of nesting."""
    log: list[str] = []
    managers = [Exit(f"exit{i}", b, log) for i, b in enumerate(behaviours)]

    async def body() -> None:
        if body_raises:
            raise Labelled("body")

    async def nest() -> list[str]:
        try:
            await run(managers, body)
        except Labelled as exc:
            return context_chain(exc)
        return []

    if not while_handling:
        return log, await nest()
    try:
        raise Labelled("stop")
    except Labelled:  # as a run's cleanup does while a stop's cancellation goes by
        return log, await nest()


BEHAVIOURS = [
    pytest.param(["pass", "pass"], id="pass-pass"),
    pytest.param(["reraise", "raise"], id="inner-raises-outer-reraises"),
    pytest.param(["reraise", "reraise", "raise"], id="reraised-twice"),
    pytest.param(["suppress", "raise"], id="outer-suppresses"),
    pytest.param(["raise", "raise"], id="both-raise"),
]


@pytest.mark.parametrize("behaviours", BEHAVIOURS)
@pytest.mark.parametrize("body_raises", [False, True], ids=["body-ok", "body-raises"])
@pytest.mark.parametrize("while_handling", [False, True], ids=["plain", "while-handling"])
async def test_exits_unwind_as_nested_statements(
    behaviours: list[str], body_raises: bool, while_handling: bool
) -> None:
    expected = await outcome(with_statements, behaviours, body_raises, while_handling)
    assert await outcome(with_nested_exits, behaviours, body_raises, while_handling) == expected


@pytest.mark.parametrize("body_raises", [False, True], ids=["body-ok", "body-raises"])
async def test_an_exception_an_inner_exit_suppressed_may_stay_as_context(body_raises: bool) -> None:
    """The one difference from nested statements: the outer exits still run in the handler of
    what the block raised, so it is the context of what they raise even if an inner exit
    suppressed it (nested statements would drop it)."""
    log, chain = await outcome(with_nested_exits, ["raise", "suppress"], body_raises, False)
    expected = await outcome(with_statements, ["raise", "suppress"], body_raises, False)
    assert log == expected[0]
    assert chain == (["exit0", "body"] if body_raises else expected[1])


async def test_closing_in_a_finally_while_a_stop_goes_by_makes_no_cycle() -> None:
    """The hang of kiln issue 24: an inner exit raises, an outer one raises it again, all while
    another exception is being handled; AsyncExitStack set the raised one's context to itself."""
    exits, log = NestedExits(), []
    await exits.enter_async_context(Exit("outer", "reraise", log))
    await exits.enter_async_context(Exit("inner", "raise", log))

    async def stop_during_close() -> None:
        try:
            raise Labelled("stop")
        finally:
            await exits.aclose()

    with pytest.raises(Labelled) as caught:
        await stop_during_close()
    assert context_chain(caught.value) == ["inner", "stop"]
    assert log == ["inner saw nothing", "outer saw inner"]


async def test_callbacks_run_last_first_among_the_managers() -> None:
    order: list[str] = []

    async def closing() -> None:
        order.append("async callback")

    async with NestedExits() as exits:
        exits.callback(lambda: order.append("first callback"))
        await exits.enter_async_context(Exit("manager", "pass", order))
        exits.push_async_callback(closing)
    assert order == ["async callback", "manager saw nothing", "first callback"]


async def test_aclose_leaves_everything_once() -> None:
    log: list[str] = []
    exits = NestedExits()
    await exits.enter_async_context(Exit("manager", "pass", log))
    await exits.aclose()
    await exits.aclose()
    assert log == ["manager saw nothing"]
