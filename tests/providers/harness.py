"""Helpers shared by the provider tests: requests, a recording sleep, draining and cancelling."""

from __future__ import annotations

import anyio

from app.providers.base import Message, ProviderRequest, ProviderStream
from app.providers.retry import RetryPolicy
from tests.providers.wire_servers import WireServer

NO_RETRY = RetryPolicy(max_attempts=1)
DISCONNECT_LIMIT_SECONDS = 10.0  # a failure guard only: the server normally sees it at once


def retries(attempts: int) -> RetryPolicy:
    """A policy of ``attempts`` attempts whose jitter is fixed (the random draw is 0.5)."""
    return RetryPolicy(max_attempts=attempts, random_fraction=lambda: 0.5)


def ask(
    model: str,
    text: str = "Build a counter app.",
    *,
    history: tuple[Message, ...] = (),
    system: str = "You are kiln.",
    max_output_tokens: int = 1000,
) -> ProviderRequest:
    """A request for ``model``: ``history`` then one user message."""
    messages = (*history, Message("user", text))
    return ProviderRequest(model, messages, system, max_output_tokens)


class SleepRecorder:
    """A sleep that returns at once and remembers how long it was asked to wait."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


async def drain(stream: ProviderStream) -> list[str]:
    """Every delta of ``stream``."""
    return [delta async for delta in stream]


async def drain_into(stream: ProviderStream, deltas: list[str]) -> None:
    """Append every delta of ``stream`` to ``deltas`` (which keeps them if the stream fails)."""
    async for delta in stream:
        deltas.append(delta)


async def cancel_while_waiting(stream: ProviderStream, cancel: anyio.Event) -> list[str]:
    """Read ``stream``; once the first delta is in, set ``cancel`` while the next read waits."""
    deltas: list[str] = []
    async with anyio.create_task_group() as group:

        async def cancel_soon() -> None:
            await anyio.wait_all_tasks_blocked()  # the reader waits on the network now
            cancel.set()

        async for delta in stream:
            deltas.append(delta)
            if len(deltas) == 1:
                group.start_soon(cancel_soon)
    return deltas


async def saw_disconnect(server: WireServer) -> bool:
    """Whether the server saw the client close its hung stream (waits a bounded time)."""
    return await anyio.to_thread.run_sync(server.disconnected.wait, DISCONNECT_LIMIT_SECONDS)
