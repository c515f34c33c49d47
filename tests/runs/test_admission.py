"""Admission: limits of active runs, a request rate and the host's sandbox capacity, atomic
under concurrency."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
import redis.asyncio

from app.api.errors import kiln_error_handler
from app.config import ServiceSettings
from app.errors import AdmissionRefused
from app.runs.admission import OWNERS_KEY, Admission, chat_key, user_key
from app.store import Store
from sandbox.backends.contract import HostCapacity
from sandbox.backends.host_memory import MIB, HostMemory, busy_bytes
from sandbox.lifecycle.registry import SandboxRecord, SandboxRegistry
from sandbox.settings import SandboxSettings
from tests.runs.conftest import new_chat, with_limits

pytestmark = pytest.mark.anyio


async def refusal(admission: Admission, run_id: str, user: str, chat: str) -> str | None:
    """The limit that refused, or None when admitted."""
    try:
        await admission.admit(run_id, user, chat)
    except AdmissionRefused as exc:
        return exc.limit
    return None


@pytest.mark.parametrize(
    ("limits", "second", "refused_by"),
    [
        pytest.param({}, ("u1", "c1"), "chat", id="chat"),
        pytest.param(
            {"max_active_runs_per_chat": 5, "max_active_runs_per_user": 1},
            ("u1", "c2"),
            "user",
            id="user",
        ),
        pytest.param({"max_active_runs": 1}, ("u2", "c3"), "global", id="global"),
        pytest.param({"user_requests_per_minute": 1}, ("u1", "c2"), "rate", id="rate"),
    ],
)
async def test_each_limit_refuses_and_names_itself(
    settings: ServiceSettings,
    client: redis.asyncio.Redis,
    limits: dict[str, int],
    second: tuple[str, str],
    refused_by: str,
) -> None:
    admission = Admission(client, with_limits(settings, **limits))
    assert await refusal(admission, "r1", "u1", "c1") is None
    assert await refusal(admission, "r2", *second) == refused_by
    assert await admission.active_runs() == {"r1"}


async def test_a_refusal_message_says_what_to_do(
    settings: ServiceSettings, client: redis.asyncio.Redis
) -> None:
    admission = Admission(client, settings)
    await admission.admit("r1", "u1", "c1")
    with pytest.raises(AdmissionRefused, match="this chat has 1 active run") as refused:
        await admission.admit("r2", "u1", "c1")
    assert refused.value.code == "admission_refused"


async def test_a_released_slot_is_free_again_and_releasing_twice_is_harmless(
    settings: ServiceSettings, client: redis.asyncio.Redis
) -> None:
    admission = Admission(client, settings)
    await admission.admit("r1", "u1", "c1")
    await admission.release("r1", "u1", "c1")
    await admission.release("r1", "u1", "c1")
    await admission.admit("r2", "u1", "c1")
    assert await admission.active_runs() == {"r2"}
    assert await client.scard(user_key("u1")) == 1
    assert await client.scard(chat_key("c1")) == 1


async def test_admitting_the_same_run_twice_takes_one_slot(
    settings: ServiceSettings, client: redis.asyncio.Redis
) -> None:
    admission = Admission(client, settings)
    await admission.admit("r1", "u1", "c1")
    await admission.admit("r1", "u1", "c1")
    assert await admission.active_runs() == {"r1"}


SAME_CHAT = [(0, 0)] * 30
ONE_USER_MANY_CHATS = [(0, chat) for chat in range(40)]
MANY_USERS = [(user, chat) for user in range(10) for chat in range(5)]


@pytest.mark.parametrize(
    ("limits", "attempts", "admitted"),
    [
        pytest.param({"max_active_runs_per_user": 100}, SAME_CHAT, 1, id="per-chat"),
        pytest.param({"max_active_runs_per_user": 2}, ONE_USER_MANY_CHATS, 2, id="per-user"),
        pytest.param(
            {"max_active_runs": 7, "max_active_runs_per_user": 50}, MANY_USERS, 7, id="global"
        ),
    ],
)
async def test_concurrent_admissions_never_exceed_a_limit(
    settings: ServiceSettings,
    client: redis.asyncio.Redis,  # empties the database
    runs_redis_url: str,
    limits: dict[str, int],
    attempts: list[tuple[int, int]],
    admitted: int,
) -> None:
    """Four connections (as four API processes would) admit at the same time."""
    settings = with_limits(settings, user_requests_per_minute=1000, **limits)
    clients = [redis.asyncio.Redis.from_url(runs_redis_url) for _ in range(4)]
    outcomes: list[str | None] = []

    async def attempt(index: int, user: int, chat: int) -> None:
        admission = Admission(clients[index % len(clients)], settings)
        outcomes.append(await refusal(admission, f"r{index}", f"u{user}", f"c{user}-{chat}"))

    async with anyio.create_task_group() as tasks:
        for index, (user, chat) in enumerate(attempts):
            tasks.start_soon(attempt, index, user, chat)
    active = await Admission(clients[0], settings).active_runs()
    for opened in clients:
        await opened.aclose()
    assert outcomes.count(None) == admitted
    assert len(active) == admitted


async def test_the_rate_counts_a_sliding_minute(
    settings: ServiceSettings, client: redis.asyncio.Redis
) -> None:
    admission = Admission(client, with_limits(settings, user_requests_per_minute=2))
    await admission.admit("r1", "u1", "c1")
    await admission.release("r1", "u1", "c1")
    await admission.admit("r2", "u1", "c1")
    await admission.release("r2", "u1", "c1")
    assert await refusal(admission, "r3", "u1", "c1") == "rate"
    assert await refusal(admission, "r4", "u2", "c2") is None  # another user's own minute


async def test_reconcile_frees_ended_and_orphaned_slots(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    admission = Admission(
        client, with_limits(settings, max_active_runs_per_user=10, max_active_runs_per_chat=10)
    )
    user, chat = new_chat(store)
    ended = store.create_run(chat.id, user.id, None, None, None)
    active = store.create_run(chat.id, user.id, None, None, None)
    store.finish_run(ended.id, "completed", "done")
    for run_id in (ended.id, active.id, "orphan", "young-orphan"):
        await admission.admit(run_id, user.id, chat.id)
    old = f"{user.id} {chat.id} {time.time() - 3600:.3f}"
    await client.hset(OWNERS_KEY, "orphan", old)
    assert sorted(await admission.reconcile(store)) == sorted([ended.id, "orphan"])
    assert await admission.active_runs() == {active.id, "young-orphan"}


HOST_INSTANCE = "admission-host"


def small_host(limit: int) -> SandboxSettings:
    """Sandbox settings of a host that holds ``limit`` sandboxes."""
    return SandboxSettings(instance=HOST_INSTANCE, max_sandboxes=limit)


async def hold_sandboxes(
    client: redis.asyncio.Redis,
    *states: str,
    chat: str = "",
    owner: str = "someone",
    idle_for: float = 0.0,
) -> list[str]:
    """Record one sandbox per state in the host's registry (as the manager does), of ``owner``
    and last used ``idle_for`` seconds ago; their ids."""
    registry = SandboxRegistry(client, HOST_INSTANCE)
    ids = [f"sb{index}-{state}-{owner}" for index, state in enumerate(states)]
    used = time.time() - idle_for
    for sandbox_id, state in zip(ids, states, strict=True):
        record = SandboxRecord(
            sandbox_id, "vanilla", "v", "n", state=state, owner=owner, last_used=used
        )
        await registry.save(record)
    if chat:
        await registry.bind_chat(chat, ids[0])
    return ids


async def test_a_full_host_refuses_a_new_chat_naming_the_limit_with_retry_after(
    settings: ServiceSettings, client: redis.asyncio.Redis
) -> None:
    await hold_sandboxes(client, "in_use", "idle")
    admission = Admission(client, settings, small_host(2))
    with pytest.raises(AdmissionRefused, match=r"2 of 2 \(KILN_MAX_SANDBOXES\)") as refused:
        await admission.admit("r1", "u1", "c1")
    assert (refused.value.limit, refused.value.retry_after) == ("sandboxes", 30)
    assert await admission.active_runs() == set()  # nothing is taken, nothing queued


async def test_the_refusal_is_a_429_with_retry_after(
    settings: ServiceSettings, client: redis.asyncio.Redis
) -> None:
    await hold_sandboxes(client, "in_use")
    admission = Admission(client, settings, small_host(1))
    with pytest.raises(AdmissionRefused) as refused:
        await admission.admit("r1", "u1", "c1")
    request: Any = None  # a 4xx answer never looks at the request
    response = await kiln_error_handler(request, refused.value)
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "30"
    body = json.loads(bytes(response.body))
    assert body["error"]["limit"] == "sandboxes"
    assert "KILN_MAX_SANDBOXES" in body["error"]["message"]


@pytest.mark.parametrize(
    ("states", "bound", "admitted"),
    [
        pytest.param(("in_use",), "", False, id="full"),
        pytest.param(("in_use",), "c1", True, id="the-chat-has-its-sandbox"),
        pytest.param(("warm",), "", True, id="warm-ones-are-handed-out"),
        pytest.param(("warm", "provisioning"), "", False, id="provisioning-counts"),
    ],
)
async def test_what_counts_against_the_host(
    settings: ServiceSettings,
    client: redis.asyncio.Redis,
    states: tuple[str, ...],
    bound: str,
    admitted: bool,
) -> None:
    await hold_sandboxes(client, *states, chat=bound)
    admission = Admission(client, settings, small_host(1))
    assert (await refusal(admission, "r1", "u1", "c1") is None) is admitted


async def test_runs_still_waiting_for_their_sandbox_count_once_per_chat(
    settings: ServiceSettings, client: redis.asyncio.Redis
) -> None:
    roomy = with_limits(settings, max_active_runs_per_chat=5)
    admission = Admission(client, roomy, small_host(1))
    assert await refusal(admission, "r1", "u1", "c1") is None
    assert await refusal(admission, "r2", "u2", "c2") == "sandboxes"
    assert await refusal(admission, "r3", "u1", "c1") is None  # shares the sandbox c1 awaits


async def test_concurrent_new_chats_never_exceed_the_sandboxes(
    settings: ServiceSettings, client: redis.asyncio.Redis, runs_redis_url: str
) -> None:
    roomy = with_limits(settings, max_active_runs_per_user=100, user_requests_per_minute=1000)
    clients = [redis.asyncio.Redis.from_url(runs_redis_url) for _ in range(4)]
    outcomes: list[str | None] = []

    async def attempt(index: int) -> None:
        admission = Admission(clients[index % len(clients)], roomy, small_host(3))
        outcomes.append(await refusal(admission, f"r{index}", "u1", f"c{index}"))

    async with anyio.create_task_group() as tasks:
        for index in range(20):
            tasks.start_soon(attempt, index)
    for opened in clients:
        await opened.aclose()
    assert outcomes.count(None) == 3
    assert outcomes.count("sandboxes") == 17


async def test_a_rate_refusal_says_when_the_oldest_request_leaves_the_minute(
    settings: ServiceSettings, client: redis.asyncio.Redis
) -> None:
    admission = Admission(client, with_limits(settings, user_requests_per_minute=1))
    await admission.admit("r1", "u1", "c1")
    with pytest.raises(AdmissionRefused) as refused:
        await admission.admit("r2", "u1", "c2")
    assert refused.value.limit == "rate"
    assert refused.value.retry_after is not None
    assert 55 <= refused.value.retry_after <= 60


def host_with(headroom_mib: int, node: str = "") -> Callable[[], Awaitable[HostCapacity]]:
    """Where sandboxes live: ``headroom_mib`` above the reserve (``node``: a swarm's roomiest
    node, its memory unreserved)."""

    async def room() -> HostCapacity:
        return HostCapacity(headroom_mib * MIB, node)

    return room


@pytest.mark.parametrize(
    ("headroom_mib", "admitted"),
    [
        pytest.param(busy_bytes("vite-react") // MIB, True, id="room-for-one-busy-vite-react"),
        pytest.param(busy_bytes("vite-react") // MIB - 1, False, id="one-mib-short"),
    ],
)
async def test_a_new_chat_needs_room_for_its_sandbox_busy_above_the_memory_reserve(
    settings: ServiceSettings, client: redis.asyncio.Redis, headroom_mib: int, admitted: bool
) -> None:
    admission = Admission(client, settings, small_host(100), host_with(headroom_mib))
    verdict = await refusal(admission, "r1", "u1", "c1")
    assert verdict == (None if admitted else "memory")


@pytest.mark.parametrize(
    ("node", "words"),
    [
        pytest.param(
            "", "0.1 GiB available above the 10 % of its memory kept free", id="this-host"
        ),
        pytest.param(
            "n0d3a2b4c5d6e7f8",
            "nodes are low on memory for another app: the roomiest, n0d3a2b4c5d6, has 0.1 GiB "
            "unreserved",
            id="a-swarms-nodes",
        ),
    ],
)
async def test_a_memory_refusal_says_what_is_left_where_the_sandboxes_live(
    settings: ServiceSettings, client: redis.asyncio.Redis, node: str, words: str
) -> None:
    admission = Admission(client, settings, small_host(100), host_with(100, node))
    with pytest.raises(AdmissionRefused) as refused:
        await admission.admit("r1", "u1", "c1", "vite-react")
    message = str(refused.value)
    assert words in message
    assert "'vite-react' app may use 244 MiB" in message
    assert refused.value.retry_after == 30


async def test_without_a_room_reader_admission_reads_this_hosts_memory(
    settings: ServiceSettings, client: redis.asyncio.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    total = 10 * 1024 * MIB
    low = HostMemory(total, total // 10 + 100 * MIB)  # 100 MiB above the 10 % reserve
    monkeypatch.setattr(HostMemory, "read", classmethod(lambda cls: low))
    admission = Admission(client, settings, small_host(100))
    assert await refusal(admission, "r1", "u1", "c1") == "memory"


async def test_chats_still_waiting_for_their_sandbox_count_against_memory(
    settings: ServiceSettings, client: redis.asyncio.Redis
) -> None:
    """MemAvailable does not show a sandbox not made yet: admission counts it itself."""
    room = 2 * busy_bytes("vite-react") // MIB - 1  # one busy sandbox fits, two do not
    admission = Admission(client, settings, small_host(100), host_with(room))
    assert await refusal(admission, "r1", "u1", "c1") is None
    assert await refusal(admission, "r2", "u2", "c2") == "memory"
    # A chat that has its sandbox needs no new memory.
    await hold_sandboxes(client, "idle", chat="c3")
    assert await refusal(admission, "r3", "u3", "c3") is None


@pytest.mark.parametrize(
    ("states", "admitted"),
    [
        pytest.param(("in_use", "in_use"), False, id="two-busy"),
        pytest.param(("in_use", "idle"), True, id="an-idle-one-is-given-up"),
        pytest.param(("in_use", "warm"), True, id="warm-ones-are-nobodys"),
    ],
)
async def test_one_user_holds_at_most_their_share_of_sandboxes(
    settings: ServiceSettings,
    client: redis.asyncio.Redis,
    states: tuple[str, ...],
    admitted: bool,
) -> None:
    await hold_sandboxes(client, *states, owner="u1")
    per_user = dataclasses.replace(small_host(100), max_sandboxes_per_user=2)
    admission = Admission(client, with_limits(settings, max_active_runs_per_user=5), per_user)
    assert (await refusal(admission, "r1", "u1", "c1") is None) is admitted
    assert await refusal(admission, "r2", "u2", "c2") is None  # another user is not held up


async def test_a_busy_user_is_told_in_words(
    settings: ServiceSettings, client: redis.asyncio.Redis
) -> None:
    await hold_sandboxes(client, "in_use", owner="u1")
    per_user = dataclasses.replace(small_host(100), max_sandboxes_per_user=1)
    admission = Admission(client, settings, per_user)
    with pytest.raises(AdmissionRefused, match=r"KILN_MAX_SANDBOXES_PER_USER") as refused:
        await admission.admit("r1", "u1", "c1")
    assert refused.value.limit == "user_sandboxes"


@pytest.mark.parametrize(
    ("idle_for", "admitted"),
    [
        pytest.param(600.0, True, id="idle-past-the-full-host-ttl-is-given-up"),
        pytest.param(60.0, False, id="recently-used-is-kept"),
    ],
)
async def test_on_a_full_host_a_long_idle_sandbox_makes_room(
    settings: ServiceSettings, client: redis.asyncio.Redis, idle_for: float, admitted: bool
) -> None:
    await hold_sandboxes(client, "idle", idle_for=idle_for)
    host = dataclasses.replace(small_host(1), idle_ttl_full_seconds=300.0)
    admission = Admission(client, settings, host, host_with(0))
    verdict = await refusal(admission, "r1", "u1", "c1")
    assert verdict == (None if admitted else "sandboxes")
