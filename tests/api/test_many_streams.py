"""500 live event streams on one ``kiln serve`` (issue 15): 25 users each follow their own run
with 20 streams (the default per-user limit), all opened while the runs are still queued, so
every event reaches every stream through the process's one pub/sub fan-out
(:mod:`app.runs.live`). Meanwhile the server holds one pub/sub connection and a handful of
others to Redis, not one per stream; another user's message gets 202 and ``/healthz`` is green.

The runs are queued because the server runs no worker (``--no-worker``); a ``kiln worker`` on
the same data directory starts once every stream is open. The Redis counted is the server's
embedded one, so every connection on it is kiln's (or this test's one probe).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import redis

from app.config import ServiceSettings
from app.service.embedded_redis import recorded_url
from app.store import Store
from tests.api.harness import sse_frames
from tests.app.kiln_process import LOGIN_LINK, KilnProcess, hello_recordings, kiln_env
from tests.sandbox.docker_support import swept_instance
from tests.servers import free_port
from tests.waiting import until

pytestmark = [pytest.mark.docker, pytest.mark.redis, pytest.mark.slow]
USERS = 25
STREAMS_PER_USER = 20  # KILN_MAX_EVENT_STREAMS_PER_USER's default
STREAMS = USERS * STREAMS_PER_USER
OPEN_LIMIT_SECONDS = 60.0
RUNS_LIMIT_SECONDS = 90.0
# Besides the one pub/sub: the pool's connections in use at once, nowhere near one per stream
# (measured: 1, with 500 streams open).
OTHER_CONNECTIONS_MAX = 10
RECORDING = "steady"


def steady_recording() -> str:
    """A conversational answer of a few events: every one reaches 500 streams (300 words took
    80 s of CI's two cores, mostly parsing frames; the fan-out is the same with 60)."""
    prose = " ".join(f"word{n}" for n in range(60))
    return f"<Response>\n{prose}\n</Response>\n<edward_done />\n"


@dataclass
class Follower:
    """What one stream received: the event ids in order, and the last event."""

    ids: list[int] = field(default_factory=list)
    last: dict[str, object] = field(default_factory=dict)


@dataclass
class Served:
    """A running ``kiln serve --no-worker``: the process, its environment, data dir and port."""

    process: KilnProcess
    env: dict[str, str]
    data: Path
    port: int


@pytest.fixture
def served(tmp_path: Path, redis_url: str) -> Iterator[Served]:
    """A ``kiln serve --no-worker`` with its embedded Redis, on an instance swept after (each
    run's chat keeps the sandbox it acquired early, and a stopped serve parks it)."""
    recordings = hello_recordings(tmp_path / "rec")
    (recordings / f"{RECORDING}.txt").write_text(steady_recording())
    data, port = tmp_path / "data", free_port()
    args = ["serve", "--port", str(port), "--data-dir", str(data), "--no-build", "--no-worker"]
    with swept_instance("test-streams", redis_url) as instance:
        env = kiln_env(instance, recordings)
        with KilnProcess(args, env, tmp_path / "serve.log") as process:
            process.wait_for(LOGIN_LINK)
            yield Served(process, env, data, port)


def api_tokens(data: Path, count: int) -> list[str]:
    """``count`` new users of the server's database, an API token each."""
    settings = ServiceSettings.from_env({"KILN_DATA_DIR": str(data)})
    store = Store(settings.database_path, settings.secret_key)
    try:
        names = [f"user{n}-{secrets.token_hex(2)}" for n in range(count)]
        return [store.create_token(store.create_user(name).id, "api") for name in names]
    finally:
        store.close()


def client_for(base: str, token: str) -> httpx.AsyncClient:
    """A client of one user, with room for all of that user's streams at once."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=STREAMS_PER_USER)
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.AsyncClient(base_url=base, headers=headers, limits=limits, timeout=120)


async def post_message(client: httpx.AsyncClient) -> str:
    """Start a run of the steady recording in a new chat; its id."""
    chat = (await client.post("/api/chats", json={"title": "steady"})).json()["chat"]
    posted = await client.post(
        f"/api/chats/{chat['id']}/messages",
        # vanilla: the run's early sandbox is the lightest (26 Vite dev servers were most of
        # the test's CPU); the streams are what is tested, not the app
        json={"content": "go", "model": RECORDING, "template": "vanilla"},
    )
    assert posted.status_code == 202, posted.text
    return str(posted.json()["run_id"])


@dataclass
class Progress:
    """How many streams the server answered, and how many ended."""

    opened: int = 0
    ended: int = 0


async def follow(
    client: httpx.AsyncClient, run_id: str, follower: Follower, progress: Progress
) -> None:
    """Follow the run's events to the end, recording them in ``follower``."""
    try:
        async with client.stream("GET", f"/api/runs/{run_id}/events") as response:
            assert response.status_code == 200, await response.aread()
            progress.opened += 1
            async for frame in sse_frames(response):
                if frame.id is None or frame.data is None:
                    continue  # the retry line, or a ping
                follower.ids.append(frame.id)
                follower.last = frame.data
                if frame.data.get("type") == "run_finished":
                    return
    finally:
        progress.ended += 1


def redis_clients(url: str) -> list[dict[str, Any]]:
    """The connections of the embedded Redis, this probe's own left out."""
    probe = redis.Redis.from_url(url)
    try:
        own = probe.client_id()
        return [c for c in probe.client_list() if int(c["id"]) != own]
    finally:
        probe.close()


@pytest.mark.anyio
async def test_500_streams_get_every_event_through_one_pub_sub_connection(
    served: Served, tmp_path: Path
) -> None:
    base, url = f"http://127.0.0.1:{served.port}", recorded_url(served.data)
    assert url is not None
    clients = [client_for(base, token) for token in api_tokens(served.data, USERS + 1)]
    followers = [[Follower() for _ in range(STREAMS_PER_USER)] for _ in range(USERS)]
    progress = Progress()
    try:
        run_ids = [await post_message(client) for client in clients[:USERS]]
        async with anyio.create_task_group() as tasks:
            for client, run_id, mine in zip(clients, run_ids, followers, strict=False):
                for follower in mine:
                    tasks.start_soon(follow, client, run_id, follower, progress)
            await until(lambda: progress.opened == STREAMS, "every stream open", OPEN_LIMIT_SECONDS)
            connections = redis_clients(url)
            other = clients[USERS]
            assert (await other.get("/healthz")).json()["ok"] is True
            await post_message(other)  # another user's message is admitted meanwhile
            worker = ["worker", "--data-dir", str(served.data)]
            env = {**served.env, "KILN_WORKER_CONCURRENCY": str(USERS + 1)}
            with KilnProcess(worker, env, tmp_path / "worker.log") as running:
                ended = "every stream ended"
                await until(lambda: progress.ended == STREAMS, ended, RUNS_LIMIT_SECONDS, 0.05)
                assert running.process.poll() is None, running.tail()
    finally:
        for client in clients:
            await client.aclose()
    pubsubs = [c for c in connections if int(c.get("sub", 0)) or int(c.get("psub", 0))]
    assert len(pubsubs) == 1, pubsubs  # the fan-out's, shared by all 500 streams
    assert len(connections) - len(pubsubs) <= OTHER_CONNECTIONS_MAX, connections
    for mine in followers:
        first = mine[0]
        assert first.last.get("status") == "completed", first.last
        assert first.ids == list(range(1, len(first.ids) + 1))  # every event, in order
        assert all(follower.ids == first.ids for follower in mine)
    assert served.process.process.poll() is None, served.process.tail()
