"""Service benchmark: concurrent replay runs through HTTP and SSE; prints numbers (never a test).

A whole kiln runs in this process the way ``kiln serve`` runs it (embedded Redis in a temporary
folder, the SQLite store, one worker, uvicorn on loopback); ``--runs`` users (20) each post one
message at the same moment and follow its event stream over SSE. The answers are conversational
replay recordings (no sandbox, so what is measured is the service, not Docker or npm), paced
like a provider. Two phases stream for the same time: ``sparse`` (N tokens at R tokens/s) and
``dense`` (4N tokens at 4R tokens/s). Reported per phase:

- **delivery**: p50/p95 of the time from an event being persisted (the store's commit,
  timestamped by an instrumented store) to the SSE client receiving it;
- **overhead**: a run's wall time (message posted to ``run_finished`` received) minus the
  recording's own replay time (its tokens over the pacing rate), mean and p95;
- **writes per run**: the store's write calls (each one transaction) per run, and how many of
  them were event batches. Equal numbers in both phases mean the writes do not grow with tokens.

Targets: p95 delivery <= 250 ms, overhead <= 1 s per run, writes per run independent of the
number of tokens.

    python bench/service.py [--runs 20] [--lines 40] [--tokens-per-second 100]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.api.app import build_app
from app.api.services import ApiSettings
from app.config import ServiceSettings
from app.providers.base import Message, ProviderRequest
from app.providers.replay import ReplayPacing, ReplayProvider
from app.runs.execution import ResolvedProvider
from app.runs.service import RunService
from app.service.embedded_redis import EmbeddedRedis
from app.service.http_server import KilnServer, server_config
from app.service.stack import ServiceStack, open_stack
from app.store import Run, Store
from app.tokens import split_tokens
from sandbox.settings import SandboxSettings

WRITE_METHODS = (
    "append_events",
    "update_run",
    "claim_run",
    "finish_run",
    "save_checkpoint",
    "request_cancel",
    "set_chat_sandbox",
    "transaction",  # RunService's submit: the user's message and the queued run, together
)
TARGET_P95_MS, TARGET_OVERHEAD_S = 250.0, 1.0


class CountingStore(Store):
    """A store that timestamps each persisted event and counts write calls."""

    def __init__(self, location: Path | str, secret_key: str, **options: Any) -> None:
        super().__init__(location, secret_key, **options)
        self.persisted: dict[tuple[str, int], float] = {}
        self.writes: collections.Counter[str] = collections.Counter()
        for name in WRITE_METHODS:
            setattr(self, name, self._counted(name, getattr(self, name)))

    def _counted(self, name: str, method: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.writes[name] += 1
            result = method(*args, **kwargs)
            if name == "append_events":
                now = time.perf_counter()
                for seq in result:
                    self.persisted[(args[0], seq)] = now
            return result

        return counted


def answer(lines: int, words_per_line: int) -> str:
    """A conversational answer: ``lines`` lines of ``words_per_line`` words."""
    body = "\n".join(" ".join(f"word{n}x{w}" for w in range(words_per_line)) for n in range(lines))
    return f"<Response>\n{body}\n</Response>\n<edward_done />\n"


@dataclasses.dataclass
class Phase:
    """One kind of recording and its pacing."""

    name: str
    text: str
    tokens_per_second: float
    # The recording streamed by the replay provider alone, with nothing else running: the
    # pacing's own sleeps drift a little past tokens / rate, and that is not kiln's overhead.
    replay_seconds: float = 0.0

    @property
    def tokens(self) -> int:
        return sum(tokens for _piece, tokens in split_tokens(self.text))

    async def measure_replay(self, recordings: Path) -> None:
        """Time the recording streamed by the replay provider alone."""
        pacing = ReplayPacing(tokens_per_second=self.tokens_per_second)
        provider = ReplayProvider(recordings, pacing=pacing)
        request = ProviderRequest(model=self.name, messages=(Message("user", "talk"),))
        started = time.perf_counter()
        async for _chunk in provider.stream(request):
            pass
        self.replay_seconds = time.perf_counter() - started


@dataclasses.dataclass
class Measured:
    """What one phase's clients saw."""

    received: dict[tuple[str, int], float] = dataclasses.field(default_factory=dict)
    wall: dict[str, float] = dataclasses.field(default_factory=dict)
    # Per run: posted -> run_started, run_started -> last content event, -> run_finished.
    stages: dict[str, tuple[float, float, float]] = dataclasses.field(default_factory=dict)


def provider_factory(folder: Path, phases: Mapping[str, Phase]) -> Any:
    def build(run: Run, keys: Mapping[str, str]) -> ResolvedProvider:
        model = run.model or ""
        pacing = ReplayPacing(tokens_per_second=phases[model].tokens_per_second)
        return ResolvedProvider(ReplayProvider(folder, pacing=pacing), "replay", model, 200_000)

    return build


async def one_client(client: httpx.AsyncClient, token: str, phase: str, measured: Measured) -> None:
    """Post a message and follow its events to the end, timestamping each one."""
    headers = {"Authorization": f"Bearer {token}"}
    chat = (await client.post("/api/chats", json={}, headers=headers)).json()["chat"]["id"]
    started = time.perf_counter()
    posted = await client.post(
        f"/api/chats/{chat}/messages", json={"content": "talk", "model": phase}, headers=headers
    )
    run_id = posted.json()["run_id"]
    seq, first, last_content = 0, 0.0, 0.0
    path = f"/api/runs/{run_id}/events"
    async with client.stream("GET", path, headers=headers) as response:
        async for line in response.aiter_lines():
            now = time.perf_counter()
            if line.startswith("id: "):
                seq = int(line[4:])
                measured.received[(run_id, seq)] = now
                first = first or now
            elif line == "event: text":
                last_content = now
            elif line.startswith("event: run_finished"):
                break
    ended = time.perf_counter()
    measured.wall[run_id] = ended - started
    measured.stages[run_id] = (first - started, last_content - first, ended - last_content)


async def run_phase(
    base: str, store: CountingStore, phase: Phase, runs: int
) -> tuple[Measured, collections.Counter[str]]:
    """``runs`` users post at once and follow their runs; what they saw, the store's writes."""
    tokens = []
    for _ in range(runs):
        user = store.create_user(f"bench-{secrets.token_hex(4)}")
        tokens.append(store.create_token(user.id, "api"))
    before = collections.Counter(store.writes)
    measured = Measured()
    # One client for all users: building one costs ~30 ms of CPU (TLS context), which would
    # stall the event loop the service shares with the clients in this process.
    limits = httpx.Limits(max_connections=runs * 2 + 10)
    async with (
        httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client,
        anyio.create_task_group() as tasks,
    ):
        for token in tokens:
            tasks.start_soon(one_client, client, token, phase.name, measured)
    return measured, store.writes - before


def report(phase: Phase, store: CountingStore, measured: Measured, writes: Any, runs: int) -> None:
    delays = [
        (received - store.persisted[key]) * 1000
        for key, received in measured.received.items()
        if key in store.persisted
    ]
    overheads = [wall - phase.replay_seconds for wall in measured.wall.values()]
    quantiles = statistics.quantiles(delays, n=100)
    total = sum(writes.values())
    print(
        f"\n[{phase.name}] {runs} concurrent runs, {phase.tokens} tokens each at "
        f"{phase.tokens_per_second:g} tokens/s (replayed alone in {phase.replay_seconds:.2f} s, "
        f"nominal {phase.tokens / phase.tokens_per_second:.2f} s)"
    )
    print(f"  events delivered: {len(delays)} ({len(delays) / runs:.0f} per run)")
    print(
        f"  delivery persisted->SSE: p50 {quantiles[49]:.1f} ms, p95 {quantiles[94]:.1f} ms "
        f"(target <= {TARGET_P95_MS:.0f} ms)"
    )
    print(
        f"  run overhead: mean {statistics.mean(overheads):.2f} s, "
        f"max {max(overheads):.2f} s "
        f"(target <= {TARGET_OVERHEAD_S:.0f} s)"
    )
    stages = list(zip(*measured.stages.values(), strict=True))
    print(
        "  where the time went (mean): "
        f"posted->run_started {statistics.mean(stages[0]):.2f} s, "
        f"streaming {statistics.mean(stages[1]):.2f} s, "
        f"last text->run_finished {statistics.mean(stages[2]):.2f} s"
    )
    print(
        f"  store writes per run: {total / runs:.1f} "
        f"(event batches {writes['append_events'] / runs:.1f}); "
        f"tokens per write: {phase.tokens * runs / total:.1f}"
    )


async def bench(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="kiln-bench-service-"))
    recordings = root / "recordings"
    recordings.mkdir()
    rate = args.tokens_per_second
    phases = {
        "sparse": Phase("sparse", answer(args.lines, 4), rate),
        "dense": Phase("dense", answer(args.lines, 16), rate * 4),
    }
    for phase in phases.values():
        (recordings / f"{phase.name}.txt").write_text(phase.text)
        await phase.measure_replay(recordings)
    async with EmbeddedRedis(root / "data") as redis_server:
        settings = ServiceSettings(
            root / "data", secrets.token_hex(16), redis_url=redis_server.url,
            max_active_runs_per_user=2, worker_concurrency=args.runs + 4,
        )  # fmt: skip
        store = CountingStore(
            settings.database_location, settings.secret_key, pool_size=settings.database_pool
        )
        sandboxes = dataclasses.replace(
            SandboxSettings.from_env(), warm_pool_size=0, instance=f"bench-{secrets.token_hex(3)}"
        )
        async with open_stack(settings, sandboxes, store=store) as stack:
            await serve_and_measure(stack, store, recordings, phases, args.runs)


async def serve_and_measure(
    stack: ServiceStack,
    store: CountingStore,
    recordings: Path,
    phases: Mapping[str, Phase],
    runs: int,
) -> None:
    async with serving(stack, recordings, phases) as base:
        await run_phase(base, store, phases["sparse"], 1)  # warm up: load what loads once
        for phase in phases.values():
            measured, writes = await run_phase(base, store, phase, runs)
            report(phase, store, measured, writes, runs)


@contextlib.asynccontextmanager
async def serving(
    stack: ServiceStack, recordings: Path, phases: Mapping[str, Phase]
) -> AsyncIterator[str]:
    """The API on ``stack`` with one worker replaying ``phases``, on loopback: its base URL."""
    runs_service = RunService(stack.store, stack.redis, stack.settings, env={})
    app = build_app(
        stack.store, runs_service, stack.manager, settings=ApiSettings(recordings_dir=recordings)
    )
    server = KilnServer(server_config(app, "127.0.0.1", 0, access_log=False))
    server.config.log_level = "warning"
    async with anyio.create_task_group() as tasks:
        for worker in stack.workers(1, provider_factory(recordings, phases)):
            await tasks.start(worker.run)
        tasks.start_soon(server.serve)
        while not server.started:
            await anyio.sleep(0.05)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
        server.should_exit = True
        await anyio.sleep(0.5)
        tasks.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="concurrent runs per phase")
    parser.add_argument("--lines", type=int, default=40, help="lines of the sparse answer")
    parser.add_argument("--tokens-per-second", type=float, default=100.0, help="sparse pacing")
    anyio.run(bench, parser.parse_args())


if __name__ == "__main__":
    main()
