"""The preview's hot-update hold: messages dropped while held, one full reload at release."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, cast

import anyio
import pytest
import redis.asyncio
from anyio.streams.memory import MemoryObjectReceiveStream
from starlette.types import Message
from websockets.asyncio.client import ClientConnection, connect

from sandbox.preview.hmr_hold import (
    FULL_RELOAD,
    HmrHold,
    hold_key,
    hold_preview,
    preview_held,
    redis_hold,
    release_preview,
)
from sandbox.preview.upstream import pump_websocket
from tests.sandbox.preview import test_proxy as proxy_tests
from tests.sandbox.preview.test_proxy import (
    VITE_HMR,
    ServeProxy,
    ViteSandbox,
    browser,
    next_hmr_message,
    wait_for_dev_server,
    write_into,
    ws_connect,
)
from tests.waiting import until

# The real vite-react sandbox and the proxies of the proxy's own tests.
proxy_errors = proxy_tests.proxy_errors
serve_proxy = proxy_tests.serve_proxy
vite_sandbox = proxy_tests.vite_sandbox

DEADLINE_SECONDS = 10.0


class FakeUpstream:
    """A dev server's WebSocket: yields what the test puts in, then closes normally."""

    def __init__(self, messages: MemoryObjectReceiveStream[str]) -> None:
        self._messages = messages
        self.close_code: int | None = 1000
        self.close_reason = ""

    async def __aiter__(self) -> AsyncIterator[str]:
        async with self._messages:
            async for message in self._messages:
                yield message

    async def send(self, data: Any) -> None:
        """The browser's messages are not under test."""

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Nothing to close."""


async def wait_for(sent: list[Message], count: int) -> None:
    """Until the browser got ``count`` messages, under a deadline."""
    await until(lambda: len(sent) >= count, f"{count} message(s) to the browser", DEADLINE_SECONDS)


@pytest.mark.anyio
async def test_held_messages_are_dropped_and_release_reloads_once() -> None:
    flag = {"held": True}

    async def read() -> bool:
        return flag["held"]

    to_upstream, from_dev_server = anyio.create_memory_object_stream[str](10)
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        await anyio.sleep_forever()
        raise AssertionError  # pragma: no cover

    hold = HmrHold(read, poll_seconds=0.01)
    upstream = cast(ClientConnection, FakeUpstream(from_dev_server))
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(pump_websocket, receive, send, upstream, hold)
        await to_upstream.send('{"type":"error","err":{}}')  # mid-answer: never shown
        await to_upstream.send('{"type":"update"}')
        flag["held"] = False
        await wait_for(sent, 1)
        await to_upstream.send('{"type":"update","after":"release"}')
        await wait_for(sent, 2)
        await to_upstream.aclose()
        await wait_for(sent, 3)
    texts = [m.get("text") for m in sent]
    assert texts == [FULL_RELOAD, '{"type":"update","after":"release"}', None]
    assert json.loads(FULL_RELOAD)["type"] == "full-reload"
    assert sent[-1]["type"] == "websocket.close"


@pytest.mark.anyio
async def test_without_hold_everything_passes() -> None:
    to_upstream, from_dev_server = anyio.create_memory_object_stream[str](10)
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        await anyio.sleep_forever()
        raise AssertionError  # pragma: no cover

    upstream = cast(ClientConnection, FakeUpstream(from_dev_server))
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(pump_websocket, receive, send, upstream)
        await to_upstream.send('{"type":"error"}')
        await to_upstream.aclose()
        await wait_for(sent, 2)
    assert [m.get("text") for m in sent] == ['{"type":"error"}', None]


@pytest.mark.anyio
async def test_unreadable_flag_fails_open() -> None:
    client = redis.asyncio.Redis.from_url("redis://127.0.0.1:1", socket_connect_timeout=1)
    hold = redis_hold(client)("sbx")
    hold.held = True
    assert await hold.refresh() is True  # a Redis outage releases rather than freezes
    assert hold.held is False
    await client.aclose()


@pytest.mark.anyio
async def test_hold_and_release_in_real_redis(redis_url: str) -> None:
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        hold = redis_hold(client)("sbx-real")
        assert await hold.refresh() is False
        await hold_preview(client, "sbx-real")
        assert await preview_held(client, "sbx-real")
        assert 0 < await client.ttl(hold_key("sbx-real")) <= 120
        assert await hold.refresh() is False
        assert hold.held
        assert await release_preview(client, "sbx-real") is True
        assert await hold.refresh() is True
        assert await release_preview(client, "sbx-real") is False
    finally:
        await client.aclose()


@pytest.mark.anyio
async def test_a_crashed_worker_cannot_hold_for_good(redis_url: str) -> None:
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        await hold_preview(client, "sbx-ttl", ttl=1)
        with anyio.fail_after(DEADLINE_SECONDS):
            while await preview_held(client, "sbx-ttl"):
                await anyio.sleep(0.05)
    finally:
        await client.aclose()


BROKEN_APP = """import Missing from "./Missing.jsx"
export default function App() {
  return <Missing />
}
"""


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.anyio
async def test_a_real_vite_sandbox_through_the_proxy_is_held_then_reloaded(
    vite_sandbox: ViteSandbox, serve_proxy: ServeProxy, redis_url: str
) -> None:
    """A module importing one not written yet, while held: the browser's HMR socket gets none of
    Vite's messages about it (a direct socket to the dev server shows Vite sent them), only one
    full reload at release."""
    # The proxy runs in its own thread and loop: it reads the flag with a client of its own.
    proxy_redis = redis.Redis.from_url(redis_url)

    def hold_of(sandbox_id: str) -> HmrHold:
        key = hold_key(sandbox_id)
        return HmrHold(lambda: anyio.to_thread.run_sync(lambda: bool(proxy_redis.exists(key))))

    proxy = serve_proxy({"abc": vite_sandbox.base_url}, hold=hold_of)
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        async with browser(proxy) as http:
            await wait_for_dev_server(http)
            for module in ("/src/main.jsx", "/src/App.jsx"):
                assert (await http.get(module, headers={"accept": "*/*"})).status_code == 200
        await hold_preview(client, "abc")
        direct_uri = vite_sandbox.base_url.replace("http:", "ws:") + "/"
        async with (
            ws_connect(proxy, "/") as held,
            connect(direct_uri, subprotocols=[VITE_HMR], proxy=None) as direct,
        ):
            await next_hmr_message(direct, {"connected"})
            await anyio.to_thread.run_sync(
                write_into, vite_sandbox.container, "src/App.jsx", BROKEN_APP
            )
            sent = await next_hmr_message(direct, {"update", "full-reload", "error"})
            assert sent["type"] in {"update", "full-reload", "error"}  # Vite did tell
            await release_preview(client, "abc")
            first = await next_hmr_message(held, {"connected", "update", "full-reload", "error"})
        assert first == json.loads(FULL_RELOAD)
    finally:
        await client.delete(hold_key("abc"))
        await client.aclose()
        proxy_redis.close()
