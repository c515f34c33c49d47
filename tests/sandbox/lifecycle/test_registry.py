"""The Redis registry of sandboxes (real Redis, one fresh instance per test)."""

from __future__ import annotations

import anyio
import pytest

from sandbox.errors import SandboxUnavailable
from sandbox.lifecycle.registry import SandboxRecord, SandboxRegistry

pytestmark = [pytest.mark.anyio, pytest.mark.redis]


def _record(sandbox_id: str = "abc", **changes: object) -> SandboxRecord:
    record = SandboxRecord(
        id=sandbox_id,
        template="vanilla",
        volume=f"kiln-ws-{sandbox_id}",
        network=f"kiln-net-{sandbox_id}",
        container_id="c1",
        ip="172.18.0.2",
        state="warm",
        created=100.5,
        last_used=200.25,
    )
    return record.with_changes(**changes)


async def test_a_saved_record_reads_back_equal(registry: SandboxRegistry) -> None:
    record = _record(owner="u1", chat="c1")
    await registry.save(record)
    assert await registry.get("abc") == record
    assert await registry.all() == [record]


async def test_update_changes_fields_of_an_existing_record_only(registry: SandboxRegistry) -> None:
    await registry.save(_record())
    assert await registry.update("abc", state="in_use", last_used=300.0)
    updated = await registry.get("abc")
    assert updated == _record(state="in_use", last_used=300.0)
    # A late touch of a destroyed sandbox must not bring back a half record.
    assert not await registry.update("gone", last_used=1.0)
    assert await registry.get("gone") is None


async def test_update_refuses_unknown_fields(registry: SandboxRegistry) -> None:
    with pytest.raises(ValueError, match="'colour'"):
        await registry.update("abc", colour="red")


async def test_the_first_chat_binding_wins(registry: SandboxRegistry) -> None:
    assert await registry.bind_chat("chat-1", "first") == "first"
    assert await registry.bind_chat("chat-1", "second") == "first"
    assert await registry.chat_sandbox("chat-1") == "first"
    await registry.unbind_chat("chat-1", "second")  # not its binding: kept
    assert await registry.chat_sandbox("chat-1") == "first"
    await registry.unbind_chat("chat-1", "first")
    assert await registry.chat_sandbox("chat-1") is None


async def test_delete_forgets_the_record_and_its_chat_binding(registry: SandboxRegistry) -> None:
    record = _record(chat="chat-1")
    await registry.save(record)
    await registry.bind_chat("chat-1", "abc")
    await registry.delete(record)
    assert await registry.get("abc") is None
    assert await registry.all() == []
    assert await registry.chat_sandbox("chat-1") is None


async def test_clear_removes_every_key_of_the_instance(registry: SandboxRegistry) -> None:
    await registry.save(_record("a"))
    await registry.save(_record("b"))
    await registry.bind_chat("chat-1", "a")
    assert await registry.clear() == 4  # ids set, two records, one binding
    assert await registry.all() == []


async def test_an_unreachable_redis_is_sandbox_unavailable() -> None:
    registry = SandboxRegistry.from_url("redis://127.0.0.1:1/0", "nowhere")
    try:
        with pytest.raises(SandboxUnavailable, match="redis unreachable while read sandbox 'abc'"):
            await registry.get("abc")
    finally:
        await registry.aclose()


async def test_save_within_refuses_a_new_record_past_the_limit(registry: SandboxRegistry) -> None:
    assert await registry.save_within(_record("a"), limit=2) is None
    assert await registry.save_within(_record("b"), limit=2) is None
    assert await registry.save_within(_record("c"), limit=2) == 2
    assert [record.id for record in await registry.all()] == ["a", "b"]
    # A known sandbox is saved again at the limit (its state changes, it is no new one).
    assert await registry.save_within(_record("a", state="in_use"), limit=2) is None
    found = await registry.get("a")
    assert found is not None
    assert found.state == "in_use"


async def test_save_within_is_atomic_under_concurrency(registry: SandboxRegistry) -> None:
    outcomes: list[int | None] = []

    async def attempt(index: int) -> None:
        outcomes.append(await registry.save_within(_record(f"s{index}"), limit=5))

    async with anyio.create_task_group() as tasks:
        for index in range(30):
            tasks.start_soon(attempt, index)
    assert outcomes.count(None) == 5
    assert len(await registry.all()) == 5


def test_a_handle_carries_the_record_and_the_templates_dev_url() -> None:
    record = SandboxRecord(
        id="abc",
        template="vite-react",
        volume="kiln-ws-abc",
        network="kiln-net-abc",
        container_id="c1",
        ip="172.18.0.2",
        owner="u1",
        chat="c1",
    )
    sandbox = record.handle()
    assert (sandbox.id, sandbox.container_id, sandbox.volume, sandbox.network) == (
        "abc",
        "c1",
        "kiln-ws-abc",
        "kiln-net-abc",
    )
    assert (sandbox.owner, sandbox.chat) == ("u1", "c1")
    assert sandbox.dev_url == "http://172.18.0.2:5173"
