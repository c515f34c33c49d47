"""Store benchmark, SQLite against Postgres: prints numbers and their ratio (never a test).

Two measures, each on a SQLite file and on a Postgres database (``--database-url``, or a private
server started like the tests' one, without fsync: compare with care):

- **event writes**: ``--runs`` (20) runs written at once, one thread each (the worker's event
  writers reach the store through threads the same way), ``--batches`` batches of ``--batch``
  events per run, each batch one ``append_events`` transaction: events per second, and a check
  that every run's seqs are 1..N without a gap;
- **runs through the API**: a whole kiln in this process (embedded Redis, one worker, uvicorn
  on loopback, the conversational replay provider at a fast pace: no sandbox), ``--runs``
  users each posting ``--api-runs-per-user`` messages one after the other and following each
  over SSE to ``run_finished``: completed runs per second; on Postgres also through two hosts
  (two such stacks on data dirs of their own sharing the database, Redis and the instance, the
  users spread over both: issue 28's deployment). The instance's sandboxes are removed at the
  end.

    python bench/store.py [--runs 20] [--batches 50] [--batch 10] [--api-runs-per-user 3]
        [--database-url postgresql://...]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import secrets
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.config import ServiceSettings
from app.service.embedded_redis import EmbeddedRedis
from app.service.stack import ServiceStack, open_stack
from app.store import Store
from bench.service import Measured, Phase, answer, one_client, serving
from sandbox import NestedExits, sweep_instance
from sandbox.settings import SandboxSettings
from tests.postgres_server import PostgresServer

SECRET = "a-bench-secret-of-some-length"


@contextlib.contextmanager
def locations(url: str | None) -> Iterator[dict[str, Path | str]]:
    """The two databases: a SQLite file and a Postgres URL (a private server when none)."""
    folder = Path(tempfile.mkdtemp(prefix="kiln-bench-store-"))
    if url is not None:
        yield {"sqlite": folder / "kiln.db", "postgres": url}
        return
    server = PostgresServer()
    try:
        server.start()
        yield {"sqlite": folder / "kiln.db", "postgres": server.url}
    finally:
        server.stop()


def event_writes(location: Path | str, runs: int, batches: int, batch: int) -> float:
    """Events per second with ``runs`` runs written at once, one thread each."""
    store = Store(location, SECRET, pool_size=runs)
    user = store.create_user(f"bench-{secrets.token_hex(4)}")
    run_ids = []
    for _ in range(runs):
        chat = store.create_chat(user.id, "bench")
        run_ids.append(store.create_run(chat.id, user.id, None, "replay", "bench").id)
    events = [{"type": "text", "content": "word " * 8} for _ in range(batch)]
    start = threading.Barrier(runs + 1)

    def write(run_id: str) -> None:
        store.append_events(run_id, events)  # warm: each thread's connection is open
        start.wait()
        for _ in range(batches - 1):
            store.append_events(run_id, events)

    threads = [threading.Thread(target=write, args=(run_id,)) for run_id in run_ids]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    written = runs * (batches - 1) * batch
    for run_id in run_ids:
        seqs = [seq for seq, _ in store.events_after(run_id, 0, limit=batches * batch + 1)]
        assert seqs == list(range(1, batches * batch + 1)), f"gaps or duplicates in {run_id!r}"
    store.close()
    return written / elapsed


async def runs_through_the_api(
    location: Path | str, users: int, per_user: int, instance: str, hosts: int = 1
) -> float:
    """Completed runs per second: ``users`` users each post ``per_user`` messages in turn,
    spread over ``hosts`` API hosts (each a stack on a data dir of its own with one worker, one
    database, one Redis and one instance: a deployment, on Postgres only). A database keeps the
    ``instance`` its first host recorded: every measure on it passes the same one."""
    root = Path(tempfile.mkdtemp(prefix="kiln-bench-store-api-"))
    recordings = root / "recordings"
    recordings.mkdir()
    phase = Phase("quick", answer(4, 4), 5000.0)
    (recordings / "quick.txt").write_text(phase.text)
    async with EmbeddedRedis(root / "redis") as redis_server, NestedExits() as opened:
        bases: list[str] = []
        for host in range(hosts):
            stack = await opened.enter_async_context(
                _host_stack(root / f"host-{host}", location, redis_server.url, users, instance)
            )
            if host == 0:  # the runs' sandboxes, network and npm proxy: ours alone
                manager = stack.manager
                opened.push_async_callback(
                    functools.partial(
                        sweep_instance,
                        manager.client,
                        manager.settings.instance,
                        manager.registry,
                        manager.disk,
                    )
                )
            bases.append(
                await opened.enter_async_context(serving(stack, recordings, {"quick": phase}))
            )
        return await _post_and_follow(bases, stack.store, users, per_user)


@contextlib.asynccontextmanager
async def _host_stack(
    data: Path, location: Path | str, redis_url: str, users: int, instance: str
) -> AsyncIterator[ServiceStack]:
    """One host's stack on ``data`` (the SQLite file there unless ``location`` is a URL)."""
    settings = ServiceSettings(
        data, SECRET, redis_url=redis_url,
        database_url=location if isinstance(location, str) else None,
        max_active_runs_per_user=2, worker_concurrency=users + 4,
        user_requests_per_minute=10_000,
    )  # fmt: skip
    store = Store(settings.database_location, SECRET, pool_size=settings.database_pool)
    sandboxes = dataclasses.replace(SandboxSettings.from_env(), warm_pool_size=0, instance=instance)
    async with open_stack(settings, sandboxes, store=store) as stack:
        yield stack


async def _post_and_follow(bases: list[str], store: Store, users: int, per_user: int) -> float:
    tokens = [
        store.create_token(store.create_user(f"bench-{secrets.token_hex(4)}").id, "api")
        for _ in range(users)
    ]
    measured = Measured()
    limits = httpx.Limits(max_connections=users * 2 + 10)

    async def one_user(client: httpx.AsyncClient, token: str) -> None:
        for _ in range(per_user):
            await one_client(client, token, "quick", measured)

    async with NestedExits() as opened:
        clients = [
            await opened.enter_async_context(
                httpx.AsyncClient(base_url=base, timeout=120, limits=limits)
            )
            for base in bases
        ]
        for client in clients:
            await one_client(client, tokens[0], "quick", Measured())  # warm up
        began = time.perf_counter()
        async with anyio.create_task_group() as tasks:
            for index, token in enumerate(tokens):  # users spread over the hosts
                tasks.start_soon(one_user, clients[index % len(clients)], token)
        elapsed = time.perf_counter() - began
    stages = [statistics.mean(stage) for stage in zip(*measured.stages.values(), strict=True)]
    print(
        f"    (mean per run: posted->run_started {stages[0]:.2f} s, streaming {stages[1]:.2f} s,"
        f" last text->run_finished {stages[2]:.2f} s)"
    )
    return len(measured.wall) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="concurrent runs (and API users)")
    parser.add_argument("--batches", type=int, default=50, help="event batches per run")
    parser.add_argument("--batch", type=int, default=10, help="events per batch")
    parser.add_argument("--api-runs-per-user", type=int, default=3, help="runs per API user")
    parser.add_argument("--database-url", help="a Postgres to use (default: a private one)")
    args = parser.parse_args()
    with locations(args.database_url) as where:
        writes = {
            name: event_writes(loc, args.runs, args.batches, args.batch)
            for name, loc in where.items()
        }
        print(f"event writes, {args.runs} runs at once, batches of {args.batch}:")
        for name, rate in writes.items():
            print(f"  {name:<8} {rate:8.0f} events/s")
        print(f"  postgres/sqlite: {writes['postgres'] / writes['sqlite']:.2f}x")
        instances = {name: f"bench-{secrets.token_hex(3)}" for name in where}
        per_user = args.api_runs_per_user
        api = {
            name: anyio.run(runs_through_the_api, loc, args.runs, per_user, instances[name])
            for name, loc in where.items()
        }
        api["postgres, 2 hosts"] = anyio.run(
            runs_through_the_api, where["postgres"], args.runs, per_user, instances["postgres"], 2
        )
        print(f"runs through the API, {args.runs} users x {args.api_runs_per_user} runs:")
        for name, rate in api.items():
            print(f"  {name:<17} {rate:8.2f} runs/s")
        print(f"  postgres/sqlite: {api['postgres'] / api['sqlite']:.2f}x")
        print(f"  postgres, 2 hosts/1 host: {api['postgres, 2 hosts'] / api['postgres']:.2f}x")


if __name__ == "__main__":
    main()
