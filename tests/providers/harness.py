"""Helpers shared by the provider tests: requests, a recording sleep, draining and cancelling,
a wire server per module and the providers a test made (closed after it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import anyio
import pytest

from app.chat_images import ChatImage
from app.providers.base import Message, Provider, ProviderRequest, ProviderStream
from app.providers.retry import RetryPolicy
from tests.image_samples import gif, jpeg, png, webp
from tests.providers.wire_servers import Answer, SeenRequest, Wire, WireServer

ProviderT = TypeVar("ProviderT", bound=Provider)
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
    images: tuple[ChatImage, ...] = (),
) -> ProviderRequest:
    """A request for ``model``: ``history`` then one user message (with ``images``)."""
    messages = (*history, Message("user", text, images))
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


def wire_server_fixture(dialect: Wire) -> Callable[[], Iterator[WireServer]]:
    """A module-scoped ``server`` fixture: one server speaking ``dialect``'s wire format for
    the module; each test scripts its replies. Use as ``server = wire_server_fixture("...")``."""

    @pytest.fixture(scope="module", name="server")
    def fixture() -> Iterator[WireServer]:
        with WireServer(dialect) as wire:
            yield wire

    return fixture


class OpenedProviders:
    """The providers a test made; the ``opened`` fixture closes them after it."""

    def __init__(self) -> None:
        self.made: list[Any] = []

    def add(self, provider: ProviderT) -> ProviderT:
        """Keep ``provider`` for closing; return it."""
        self.made.append(provider)
        return provider

    async def aclose(self) -> None:
        """Close every provider made."""
        for provider in self.made:
            await provider.aclose()


SENT_IMAGES = (
    ChatImage("image/png", png(padding=300_000)),
    ChatImage("image/gif", gif()),
    ChatImage("image/jpeg", jpeg()),
    ChatImage("image/webp", webp()),
)
"""Four images, one of each kind: what the wire servers must receive, byte for byte."""


async def sent_with_images(
    server: WireServer, provider: Provider, model: str, history: tuple[Message, ...] = ()
) -> SeenRequest:
    """Stream a request whose message carries :data:`SENT_IMAGES`; the request ``server``
    received, whose images were checked to be those sent, byte for byte."""
    server.script(Answer())
    await drain(
        provider.stream(ask(model, "Like this mock-up.", history=history, images=SENT_IMAGES))
    )
    [seen] = server.requests
    assert seen.images() == [(image.media_type, image.data) for image in SENT_IMAGES]
    return seen
