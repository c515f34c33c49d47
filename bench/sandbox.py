"""Sandbox write-path benchmark: prints numbers measured in one run (never a test).

One generated recording (200 files, fed to the parser in random 1-32-character chunks) is
written into a real vite-react sandbox two ways:

- **kiln**: the Redis write buffer with the debounced, locked, one-tar-per-flush scheduler
  (``file_end`` forces a flush), exactly as a run does;
- **naive**: one ``docker exec`` per chunk appending it to the file (plus one per file to create
  it). That is slow, so it runs on the first ``--naive-files`` files and is extrapolated per
  chunk to the whole recording; the report says so.

Reported: Docker API calls (every HTTP request the Docker client sends, counted by a response
hook) and wall time of both, their ratios, and the p50/p95 latency from a chunk reaching kiln
to its bytes being readable in the container (the end of the first flush that read it), with
what one flush costs. The unpaced run pushes about 1000 chunks/s, which saturates the write
path, so the latency is also measured on the first ``--naive-files`` files paced at ``--rate``
chunks/s, like a provider's stream. Then the manager's warm-pool acquire against a cold create.
Targets: >= 50x fewer Docker calls, >= 10x less wall time, p95 chunk-to-disk <= max wait +
100 ms, warm acquire p50 <= 150 ms.

    python bench/sandbox.py [--files 200] [--seed 1] [--naive-files 10] [--samples 5] [--rate 100]
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import random
import secrets
import statistics
import sys
import tarfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import redis.asyncio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from parser import StreamParser
from parser.events import Event, FileContent, FileEnd, FileStart
from sandbox.docker_boundary import call
from sandbox.images.templates import WORKSPACE, get_template
from sandbox.lifecycle.manager import SandboxManager
from sandbox.settings import SandboxSettings
from sandbox.writes.file_events import FileEventWriter
from sandbox.writes.flush import Flusher, FlushReport, FlushScheduler
from sandbox.writes.write_buffer import WriteBuffer

TEMPLATE = "vite-react"
FOLDER = "bench"
COMPONENT = """import {{ useState }} from "react";

export default function Widget{i}({{ items }}) {{
  const [open, setOpen] = useState(false);
  const shown = items.filter((item) => item.size < {i} && item.size > 0);
  return (
    <section className="widget-{i}">
      <h2 onClick={{() => setOpen(!open)}}>Widget {i} &amp; friends — ünïcode</h2>
      {{open && shown.map((item) => <p key={{item.id}}>{{item.label}}</p>)}}
    </section>
  );
}}
"""


def generate_files(count: int, seed: int) -> dict[str, str]:
    """``count`` JSX-like files of varied length."""
    rng = random.Random(seed)
    return {
        f"{FOLDER}/part{i % 10}/Widget{i}.jsx": COMPONENT.format(i=i) * rng.randint(1, 4)
        for i in range(count)
    }


def recording(files: dict[str, str]) -> str:
    """The tagged answer that writes ``files``."""
    body = "".join(f'<file path="{path}">\n{text}</file>\n' for path, text in files.items())
    return f'<Response>Here it is.\n<edward_sandbox project="bench">\n{body}</edward_sandbox>'


def parsed_events(text: str, seed: int) -> list[Event]:
    """The file events of ``text`` fed to the parser in random 1-32-character chunks."""
    rng, parser, events = random.Random(seed), StreamParser(), []
    start = 0
    while start < len(text):
        size = rng.randint(1, 32)
        events += parser.feed(text[start : start + size])
        start += size
    events += parser.close()
    return [e for e in events if isinstance(e, FileStart | FileContent | FileEnd)]


class DockerCallCounter:
    """Counts every HTTP request a docker-py client sends."""

    def __init__(self, client: Any) -> None:
        self.count = 0
        client.api.hooks["response"].append(self._count)

    def _count(self, response: Any, *args: Any, **kwargs: Any) -> None:
        self.count += 1


class TimedFlusher(Flusher):
    """A flusher that remembers when each flush started and ended."""

    spans: list[tuple[float, float]]

    async def flush(self) -> FlushReport:
        """Flush and record the span."""
        started = time.perf_counter()
        report = await super().flush()
        self.spans.append((started, time.perf_counter()))
        return report


@dataclasses.dataclass
class Measured:
    """One writer's cost on (part of) the recording."""

    seconds: float
    docker_calls: int
    chunks: int
    latencies: list[float] = dataclasses.field(default_factory=list)
    flushes: list[float] = dataclasses.field(default_factory=list)  # seconds each flush took


async def write_buffered(
    manager: SandboxManager,
    sandbox_id: str,
    events: list[Event],
    counter: DockerCallCounter,
    interval: float = 0.0,
) -> Measured:
    """kiln's write path: buffer, debounced locked flushes, one tar each.

    ``interval`` paces the chunks (seconds between two), as a provider's stream would.
    """
    settings = manager.settings
    client = redis.asyncio.Redis.from_url(settings.redis_url)
    buffer = WriteBuffer(client, sandbox_id, ttl_seconds=600)
    flusher = TimedFlusher(buffer, manager.container_for)
    flusher.spans = []
    arrivals: list[tuple[float, float]] = []
    debounce, max_wait = settings.flush_debounce_seconds, settings.flush_max_wait_seconds
    before, started = counter.count, time.perf_counter()
    try:
        async with FlushScheduler(flusher, debounce, max_wait) as scheduler:
            writer = FileEventWriter(buffer, scheduler, get_template(TEMPLATE), _no_file)
            await _drive(writer, events, arrivals, interval)
            await scheduler.wait_flushed()
        seconds = time.perf_counter() - started
        await buffer.discard()
    finally:
        await client.aclose()
    latencies = _latencies(arrivals, flusher.spans)
    flushes = [end - start for start, end in flusher.spans]
    return Measured(seconds, counter.count - before, len(arrivals), latencies, flushes)


async def _no_file(path: str) -> str | None:
    return None


async def _drive(
    writer: FileEventWriter,
    events: list[Event],
    arrivals: list[tuple[float, float]],
    interval: float,
) -> None:
    for event in events:
        if isinstance(event, FileContent):
            arrived = time.perf_counter()
            await writer.append(event.path, event.content)
            arrivals.append((arrived, time.perf_counter()))
            if interval:
                await anyio.sleep(interval)
        elif isinstance(event, FileStart):
            await writer.start(event.path)
        elif isinstance(event, FileEnd):
            await writer.end(event.path)


def _latencies(
    arrivals: list[tuple[float, float]], spans: list[tuple[float, float]]
) -> list[float]:
    """Per chunk: from arrival to the end of the first flush that started after it was buffered."""
    out, index = [], 0
    for arrived, buffered in arrivals:
        while spans[index][0] < buffered:
            index += 1
        out.append(spans[index][1] - arrived)
    return out


def naive_append(container: Any, events: list[Event]) -> int:
    """One ``docker exec`` per chunk (and per new file); returns the chunks written."""
    chunks = 0
    for event in events:
        if isinstance(event, FileStart):
            script = 'mkdir -p "$(dirname "$1")" && : > "$1"'
            _exec(container, ["sh", "-c", script, "sh", event.path])
        elif isinstance(event, FileContent):
            _exec(
                container, ["sh", "-c", 'printf %s "$1" >> "$2"', "sh", event.content, event.path]
            )
            chunks += 1
    return chunks


def _exec(container: Any, argv: list[str]) -> None:
    result = container.exec_run(argv, user="1000:1000", workdir=WORKSPACE)
    if result.exit_code != 0:
        raise RuntimeError(f"naive write failed: {argv[:4]!r}: {result.output!r}")


async def write_naive(
    manager: SandboxManager, sandbox_id: str, events: list[Event], counter: DockerCallCounter
) -> Measured:
    """The naive writer on ``events``."""
    container = await manager.container_for(sandbox_id)
    before, started = counter.count, time.perf_counter()
    chunks = await call(naive_append, container, events)
    return Measured(time.perf_counter() - started, counter.count - before, chunks)


def first_files(events: list[Event], count: int) -> list[Event]:
    """The events of the first ``count`` files."""
    ends = [i for i, e in enumerate(events) if isinstance(e, FileEnd)]
    return events[: ends[min(count, len(ends)) - 1] + 1]


def read_tree(container: Any, folder: str) -> dict[str, str]:
    """Every regular file under ``/workspace/<folder>``, by workspace-relative path."""
    stream, _ = container.get_archive(f"{WORKSPACE}/{folder}")
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        out = {}
        for member in tar.getmembers():
            extracted = tar.extractfile(member) if member.isfile() else None
            if extracted is not None:
                out[member.name] = extracted.read().decode()
        return out


async def time_it(action: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    """Seconds ``action`` took, and its result."""
    started = time.perf_counter()
    result = await action()
    return time.perf_counter() - started, result


async def warm_versus_cold(settings: SandboxSettings, samples: int) -> dict[str, list[float]]:
    """Cold create (container started; and until the dev server answers) vs warm acquire."""
    pooled = dataclasses.replace(
        settings, warm_pool_size=1, warm_pool_max=1, warm_pool_templates=(TEMPLATE,)
    )
    manager = await SandboxManager.open(pooled)
    times: dict[str, list[float]] = {"cold": [], "cold_ready": [], "warm": []}
    try:
        for _ in range(samples):
            seconds, sandbox = await time_it(lambda: manager.provision(TEMPLATE))
            ready, _ = await time_it(lambda: manager.wait_ready(sandbox.id))  # noqa: B023
            times["cold"].append(seconds)
            times["cold_ready"].append(seconds + ready)
            await manager.destroy(sandbox.id)
        async with manager:
            for index in range(samples):
                await _until_pool_ready(manager)
                chat = f"bench-{index}-{secrets.token_hex(3)}"
                seconds, sandbox = await time_it(
                    lambda: manager.acquire(chat, "bench", TEMPLATE)  # noqa: B023
                )
                times["warm"].append(seconds)
                await manager.destroy(sandbox.id)
    finally:
        await _destroy_all(manager)
        await manager.aclose()
    return times


async def _until_pool_ready(manager: SandboxManager) -> None:
    with anyio.fail_after(300):
        while manager.pool.available(TEMPLATE) < 1:
            await anyio.sleep(0.05)


async def _destroy_all(manager: SandboxManager) -> None:
    for record in await manager.list():
        await manager.destroy(record.id)


def percentile(values: list[float], fraction: float) -> float:
    """The ``fraction`` quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def report_writes(kiln: Measured, naive: Measured, naive_files: int) -> None:
    """Print the write-path comparison."""
    scale = kiln.chunks / naive.chunks
    naive_calls, naive_seconds = naive.docker_calls * scale, naive.seconds * scale
    lines = [
        f"chunks: {kiln.chunks}; naive ran on the first {naive_files} files "
        f"({naive.chunks} chunks), extrapolated x{scale:.1f} per chunk to the whole recording",
        f"kiln : {kiln.docker_calls:8d} docker calls {kiln.seconds:8.2f} s",
        f"naive: {naive_calls:8.0f} docker calls {naive_seconds:8.2f} s "
        f"(measured: {naive.docker_calls} calls, {naive.seconds:.2f} s)",
        f"docker calls ratio: {naive_calls / kiln.docker_calls:7.1f}x  (target >= 50x)",
        f"wall time ratio   : {naive_seconds / kiln.seconds:7.1f}x  (target >= 10x)",
    ]
    print("\n".join(lines))


def report_latency(label: str, run: Measured, settings: SandboxSettings) -> None:
    """Print chunk-to-disk latency and what one flush costs."""
    ms = [1000 * x for x in run.latencies]
    flushes = [1000 * x for x in run.flushes]
    bound = 1000 * settings.flush_max_wait_seconds + 100
    print(
        f"{label}: chunk-to-disk p50 {percentile(ms, 0.5):.0f} ms, "
        f"p95 {percentile(ms, 0.95):.0f} ms, max {max(ms):.0f} ms (target p95 <= {bound:.0f} ms); "
        f"{len(flushes)} flushes, each p50 {percentile(flushes, 0.5):.0f} ms, "
        f"p95 {percentile(flushes, 0.95):.0f} ms"
    )


def report_acquire(times: dict[str, list[float]]) -> None:
    """Print warm acquire against cold create."""
    labels = {
        "cold": "cold create (container started)",
        "cold_ready": "cold create + dev server ready",
        "warm": "warm-pool acquire",
    }
    for name, label in labels.items():
        values = [1000 * x for x in times[name]]
        spread = f"n={len(values)}, min {min(values):.0f}, max {max(values):.0f}"
        print(f"{label:32s}: p50 {statistics.median(values):7.0f} ms  ({spread})")
    print("warm acquire target: p50 <= 150 ms")


async def bench_writes(args: argparse.Namespace, settings: SandboxSettings) -> None:
    """Provision one sandbox, write the recording both ways, check kiln's bytes, report."""
    files = generate_files(args.files, args.seed)
    events = parsed_events(recording(files), args.seed)
    manager = await SandboxManager.open(settings)
    counter = DockerCallCounter(manager.client)
    try:
        sandbox = await manager.provision(TEMPLATE)
        await manager.wait_ready(sandbox.id)
        kiln = await write_buffered(manager, sandbox.id, events, counter)
        container = await manager.container_for(sandbox.id)
        if await call(read_tree, container, FOLDER) != files:
            raise SystemExit("kiln's files differ from the recording: the benchmark is void")
        subset = first_files(events, args.naive_files)
        paced = await write_buffered(manager, sandbox.id, subset, counter, 1 / args.rate)
        await call(container.exec_run, ["rm", "-rf", FOLDER], user="1000:1000", workdir=WORKSPACE)
        naive = await write_naive(manager, sandbox.id, subset, counter)
        report_writes(kiln, naive, args.naive_files)
        report_latency("unpaced, whole recording", kiln, settings)
        report_latency(
            f"paced {args.rate:g} chunks/s, first {args.naive_files} files", paced, settings
        )
    finally:
        await _destroy_all(manager)
        await manager.aclose()


def main() -> None:
    """Run the benchmark and print its numbers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--naive-files", type=int, default=10)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--rate", type=float, default=100.0, help="chunks/s of the paced run")
    args = parser.parse_args()
    instance = f"bench-{secrets.token_hex(4)}"
    settings = dataclasses.replace(
        SandboxSettings.from_env(),
        instance=instance,
        warm_pool_size=0,
    )
    anyio.run(bench_writes, args, settings)
    report_acquire(anyio.run(warm_versus_cold, settings, args.samples))


if __name__ == "__main__":
    main()
