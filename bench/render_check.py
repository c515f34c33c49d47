"""Render check benchmark (issue 23): what the check after each run costs; prints, never asserts.

Two real ``kiln serve`` servers of this checkout one after the other, each with a warm pool of
one ``vite-react`` sandbox (as ``bench/e2e.py``'s warm phase: the demo recording ``todo-app``
replayed at 100 tokens/s), one with ``KILN_RENDER_CHECK=0`` and one with the check on. Per
sample: run finished and stream end after the message (``bench/e2e.py``'s milestones), the
check's own seconds (``postgen.render.seconds``) and the render browser container's peak memory
(cgroup v1 ``memory.max_usage_in_bytes``, polled every 50 ms while it exists; ``-`` where the
host's cgroups do not show it).

Printed: medians per phase, the seconds the check adds to run finished, and the goal "run
finished <= 1.3x stream end with the check on (warm)" with its measured value, with ``uptime``
before and after. Build the images first (``kiln images build``: the servers run
``--no-build``).

    python bench/render_check.py [--samples 3] [--port 8640] [--instance bench-render-<random>]
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import docker
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.service.embedded_redis import EmbeddedRedis
from bench.e2e import (
    DEMO,
    PROMPT,
    RUN_LIMIT_SECONDS,
    Sample,
    cell,
    note_event,
    serve_env,
    signed_in,
    start_serve,
    stop_serve,
    uptime,
    wait_for_pool,
)
from bench.run_events import run_events
from sandbox.preview.render_check import RENDER_ROLE, RENDER_ROLE_LABEL
from tests.sandbox.docker_support import sweep

GOAL = 1.3
MEMORY_POLL_SECONDS = 0.05
CGROUP_PEAK = "/sys/fs/cgroup/memory/docker/{id}/memory.max_usage_in_bytes"


class PeakMemory:
    """Polls the render containers of one instance for their peak memory (a thread)."""

    def __init__(self, instance: str) -> None:
        """Watch ``instance``'s render containers once :meth:`start` is called."""
        self.instance = instance
        self.peaks: dict[str, int] = {}
        self.stopped = threading.Event()

    def start(self) -> None:
        """Poll in a daemon thread until :meth:`stop`."""
        threading.Thread(target=self._poll, daemon=True).start()

    def stop(self) -> None:
        """End the polling."""
        self.stopped.set()

    def _poll(self) -> None:
        client = docker.from_env()
        labels = [f"{RENDER_ROLE_LABEL}={RENDER_ROLE}", f"kiln.instance={self.instance}"]
        try:
            while not self.stopped.wait(MEMORY_POLL_SECONDS):
                for container in client.containers.list(filters={"label": labels}):
                    peak = read_peak(container.id)
                    if peak is not None:
                        self.peaks[container.id] = max(peak, self.peaks.get(container.id, 0))
        finally:
            client.close()


def read_peak(container_id: str) -> int | None:
    """The container's peak memory in bytes from its cgroup, or ``None``."""
    try:
        return int(Path(CGROUP_PEAK.format(id=container_id)).read_text())
    except (OSError, ValueError):
        return None


async def one_sample(api: httpx.AsyncClient) -> tuple[Sample, float | None]:
    """The demo's message in a new chat, followed to its end; its sample and the check's
    seconds (``None`` when it did not run)."""
    sample = Sample(time.perf_counter())
    message = {"content": PROMPT, "provider": "replay", "model": DEMO}
    created = (await api.post("/api/chats", json={"message": message})).raise_for_status()
    body = created.json()
    render: dict[str, Any] | None = None
    with anyio.fail_after(RUN_LIMIT_SECONDS):
        async for kind, data in run_events(api, body["run_id"]):
            render = data.get("render") if kind == "postgen" else render
            if note_event(sample, kind, data, lambda _: None):
                break
    (await api.delete(f"/api/chats/{body['chat']['id']}")).raise_for_status()
    seconds = render.get("seconds") if render and not render.get("skipped") else None
    return sample, seconds


async def run_phase(
    root: Path, args: argparse.Namespace, check: bool
) -> tuple[list[Sample], list[float], list[int]]:
    """One server (check on or off): its samples, the check's seconds, render peak memory."""
    folder = root / ("on" if check else "off")
    folder.mkdir()
    peaks = PeakMemory(args.instance)
    peaks.start()
    async with EmbeddedRedis(folder / "redis-host") as redis_server:
        recordings = folder / "recordings"  # none: every message is the demo answer
        recordings.mkdir()
        env = serve_env(args.instance, redis_server.url, True, recordings)
        env["KILN_RENDER_CHECK"] = "1" if check else "0"
        process, login_url = start_serve(folder, args.port, env)
        try:
            async with await signed_in(args.port, login_url) as api:
                samples, seconds = [], []
                for _ in range(args.samples):
                    await wait_for_pool(redis_server.url, args.instance, True)
                    sample, check_seconds = await one_sample(api)
                    samples.append(sample)
                    seconds += [check_seconds] if check_seconds is not None else []
                return samples, seconds, list(peaks.peaks.values())
        finally:
            peaks.stop()
            stop_serve(process)
            client = docker.from_env()
            try:
                sweep(client, args.instance, redis_server.url)
            finally:
                client.close()


def median(values: list[float]) -> float | None:
    """The median, or ``None`` for no values."""
    return statistics.median(values) if values else None


def ratio(sample: Sample) -> float | None:
    """Run finished / stream end, both after the message."""
    finished, end = sample.seconds("run_finished"), sample.seconds("stream_end")
    return finished / end if finished and end else None


def report(
    phases: dict[str, tuple[list[Sample], list[float], list[int]]], loads: tuple[str, str]
) -> None:
    """The table of medians, the added seconds, the goal, the load."""
    print(f"\n{'median':<34}" + "".join(f"{name:>14}" for name in phases))
    rows = {
        "stream end (s after message)": lambda s: [
            v for x in s[0] if (v := x.seconds("stream_end"))
        ],
        "run finished (s after message)": lambda s: [
            v for x in s[0] if (v := x.seconds("run_finished"))
        ],
        "run finished / stream end (x)": lambda s: [v for x in s[0] if (v := ratio(x))],
        "render check (s)": lambda s: s[1],
        "render browser peak (MiB)": lambda s: [p / 2**20 for p in s[2]],
    }
    for label, values in rows.items():
        print(
            f"{label:<34}" + "".join(f"{cell(median(values(p)), ''):>14}" for p in phases.values())
        )
    statuses = {name: [s.status for s in p[0]] for name, p in phases.items()}
    print(f"\nruns: {statuses}")
    on = median([v for x in phases["check on"][0] if (v := x.seconds("run_finished"))])
    off = median([v for x in phases["check off"][0] if (v := x.seconds("run_finished"))])
    added = cell(on - off if on is not None and off is not None else None, " s")
    print(f"the check adds to run finished: {added} (median on - median off)")
    measured = cell(median([v for x in phases["check on"][0] if (v := ratio(x))]), "x")
    print(f"goal: run finished <= {GOAL}x stream end with the check on (warm): {measured}")
    print(f"load before: {loads[0]}\nload after:  {loads[1]}")


async def bench(args: argparse.Namespace) -> None:
    """Both phases, then the report."""
    before = uptime()
    with tempfile.TemporaryDirectory(prefix="kiln-bench-render-") as root:
        phases = {
            "check off": await run_phase(Path(root), args, check=False),
            "check on": await run_phase(Path(root), args, check=True),
        }
    report(phases, (before, uptime()))


def main() -> None:
    """Parse the arguments and run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3, help="messages per phase")
    parser.add_argument("--port", type=int, default=8120, help="kiln serve's loopback port")
    parser.add_argument(
        "--instance", default=f"bench-render-{secrets.token_hex(3)}", help="KILN_INSTANCE"
    )
    anyio.run(bench, parser.parse_args())


if __name__ == "__main__":
    main()
