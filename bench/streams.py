"""Event-stream benchmark: what one open SSE stream costs a ``kiln serve``; prints numbers.

A real ``kiln serve --no-worker`` (its embedded Redis, a temporary data directory, an instance
of its own) gets users with one queued run each (no worker: the runs stay queued, so every
stream stays open, pinged, waiting for events). Streams are opened in steps, 20 per user (the
default per-user limit), and after each step the server process's resident memory, its threads
and the connections on its Redis are read. Reported per step:

- **RSS** of the server process, and **KiB per stream** over the no-stream baseline;
- **threads** of the server process (streams are tasks, not threads);
- **Redis connections**, of which **pub/sub** (one for the whole process: ``app.runs.live``).

Numbers, never assertions (``tests/api/test_many_streams.py`` checks what must hold).

    python bench/streams.py [--steps 100,250,500,1000]
"""

from __future__ import annotations

import argparse
import math
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx
import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.config import ServiceSettings
from app.service.embedded_redis import recorded_url
from app.store import Store
from tests.servers import free_port

PER_USER = 20
LOGIN_LINK = re.compile(r"http://\S+/login\?token=\S+")
START_LIMIT_SECONDS = 60.0
WIDTHS = (8, 9, 11, 8, 6, 7)
SETTLE_SECONDS = 2.0  # after a step: let the server finish its allocations before reading RSS
TIKTOKEN_CACHE = Path(__file__).resolve().parents[2] / "shared" / "tiktoken-cache"


def start_serve(folder: Path, port: int) -> subprocess.Popen[str]:
    """``kiln serve --no-worker`` on ``port`` with its data under ``folder``; once it printed
    its login link."""
    recordings = folder / "recordings"
    recordings.mkdir()
    (recordings / "steady.txt").write_text("<Response>\nNothing to see.\n</Response>\n")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "REDIS_URL"}
    env.update(
        KILN_INSTANCE=f"bench-streams-{secrets.token_hex(3)}",
        KILN_WARM_POOL_SIZE="0",
        KILN_RECORDINGS_DIR=str(recordings),
        TIKTOKEN_CACHE_DIR=os.environ.get("TIKTOKEN_CACHE_DIR", str(TIKTOKEN_CACHE)),
        PYTHONUNBUFFERED="1",
    )
    argv = [sys.executable, "-m", "app", "serve", "--port", str(port), "--no-worker"]
    argv += ["--no-build", "--data-dir", str(folder / "data"), "--log-level", "warning"]
    log = (folder / "serve.log").open("w")
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    assert process.stdout is not None
    deadline = time.monotonic() + START_LIMIT_SECONDS
    for line in process.stdout:
        if LOGIN_LINK.search(line) or time.monotonic() > deadline:
            break
    return process


def tokens_for(data: Path, users: int) -> list[str]:
    """An API token for each of ``users`` new users of the server's database."""
    settings = ServiceSettings.from_env({"KILN_DATA_DIR": str(data)})
    store = Store(settings.database_location, settings.secret_key, pool_size=settings.database_pool)
    try:
        return [store.create_token(store.create_user(f"bench{n}").id, "api") for n in range(users)]
    finally:
        store.close()


def process_status(pid: int) -> tuple[float, int]:
    """``(resident MiB, threads)`` of a process, from ``/proc``."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["Threads"])


def redis_connections(url: str) -> tuple[int, int]:
    """``(connections, of them pub/sub)`` on the server's Redis, this probe left out."""
    probe = redis.Redis.from_url(url)
    try:
        own = probe.client_id()
        clients = [c for c in probe.client_list() if int(c["id"]) != own]
    finally:
        probe.close()
    return len(clients), sum(1 for c in clients if int(c.get("sub", 0)))


async def hold_stream(client: httpx.AsyncClient, run_id: str, opened: list[int]) -> None:
    """Open the run's event stream and keep reading it (pings) until cancelled."""
    async with client.stream("GET", f"/api/runs/{run_id}/events") as response:
        if response.status_code != 200:
            raise RuntimeError(f"stream refused: {response.status_code}")
        opened.append(1)
        async for _ in response.aiter_lines():
            pass


async def queued_run(client: httpx.AsyncClient) -> str:
    """A chat and a message whose run stays queued (the server runs no worker)."""
    chat = (await client.post("/api/chats", json={"title": "bench"})).json()["chat"]
    posted = await client.post(
        f"/api/chats/{chat['id']}/messages", json={"content": "hi", "model": "steady"}
    )
    posted.raise_for_status()
    return str(posted.json()["run_id"])


async def measure(port: int, pid: int, data: Path, steps: list[int]) -> None:
    """Open streams step by step; print a row per step."""
    url = recorded_url(data)
    assert url is not None
    users = math.ceil(max(steps) / PER_USER)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=PER_USER)
    clients = [
        httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}",
            headers={"Authorization": f"Bearer {token}"},
            limits=limits,
            timeout=120,
        )
        for token in tokens_for(data, users)
    ]
    runs = [await queued_run(client) for client in clients]
    baseline, threads = process_status(pid)
    header = ("streams", "RSS MiB", "KiB/stream", "threads", "redis", "pubsub")
    print(" ".join(f"{name:>{width}}" for name, width in zip(header, WIDTHS, strict=True)))
    connections, pubsub = redis_connections(url)
    print(f"{0:>8} {baseline:>9.1f} {'-':>11} {threads:>8} {connections:>6} {pubsub:>7}")
    opened: list[int] = []
    async with anyio.create_task_group() as tasks:
        for step in steps:
            for index in range(len(opened), step):
                user = index // PER_USER
                tasks.start_soon(hold_stream, clients[user], runs[user], opened)
            while len(opened) < step:
                await anyio.sleep(0.05)
            await anyio.sleep(SETTLE_SECONDS)
            rss, threads = process_status(pid)
            connections, pubsub = redis_connections(url)
            per_stream = (rss - baseline) * 1024 / step
            print(
                f"{step:>8} {rss:>9.1f} {per_stream:>11.1f} {threads:>8} "
                f"{connections:>6} {pubsub:>7}"
            )
        tasks.cancel_scope.cancel()
    for client in clients:
        await client.aclose()


def main() -> None:
    """Parse the arguments, run the benchmark, stop the server."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="100,250,500,1000", help="stream counts to measure")
    args = parser.parse_args()
    steps = sorted(int(item) for item in args.steps.split(","))
    with tempfile.TemporaryDirectory(prefix="kiln-bench-streams-") as folder:
        port = free_port()
        process = start_serve(Path(folder), port)
        try:
            anyio.run(measure, port, process.pid, Path(folder) / "data", steps)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(60)


if __name__ == "__main__":
    main()
