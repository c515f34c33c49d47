"""Sandbox acquire and create on a Docker Swarm against the single engine, in one run (never a
test): prints numbers and the swarm/engine ratios.

The same :class:`~sandbox.lifecycle.manager.SandboxManager` runs on each backend, on an instance
of its own (no warm pool), with a private Redis:

- **create**: ``provision`` until the sandbox's workload runs (on the swarm: service created,
  placed, its node's limits applied; the images are on every node before the first sample), and
  until its dev server answers (``wait_ready``);
- **acquire, new chat**: ``acquire`` of a chat that has no sandbox (admission, create, bind);
- **acquire, same chat**: ``acquire`` again of a chat whose sandbox runs (the next message).

The swarm is 3 real nodes on this machine (tests/cluster/nodes.py, removed after), unless
``--manager`` names the ``DOCKER_HOST`` of an existing one. Both backends share this machine's
CPUs, so the ratio is what the swarm's own steps cost (service, scheduler, node engine), not
what more machines would give.

    python bench/cluster_acquire.py [--samples 8] [--template vanilla] [--manager unix://...]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sandbox.images.builder import PROXY_IMAGE
from sandbox.images.templates import get_template
from sandbox.lifecycle.manager import SandboxManager
from sandbox.settings import SandboxSettings
from tests.cluster import nodes
from tests.redis_server import start_redis, stop_redis

MEASURES = {
    "create": "create (workload running)",
    "create_ready": "create + dev server answering",
    "acquire_new": "acquire, new chat",
    "acquire_same": "acquire, same chat again",
}


async def time_it(action: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    """Seconds ``action`` took, and its result."""
    started = time.perf_counter()
    result = await action()
    return time.perf_counter() - started, result


async def measure(settings: SandboxSettings, template: str, samples: int) -> dict[str, list[float]]:
    """Each of :data:`MEASURES`, ``samples`` times, on the backend ``settings`` names."""
    manager = await SandboxManager.open(settings)
    times: dict[str, list[float]] = {name: [] for name in MEASURES}
    try:
        warm_up = await manager.provision(template)  # images onto nodes, network, proxies
        await manager.wait_ready(warm_up.id)
        await manager.destroy(warm_up.id)
        for index in range(samples):
            seconds, sandbox = await time_it(lambda: manager.provision(template))
            ready, _ = await time_it(lambda: manager.wait_ready(sandbox.id))  # noqa: B023
            times["create"].append(seconds)
            times["create_ready"].append(seconds + ready)
            await manager.destroy(sandbox.id)
            chat = f"bench-{index}-{secrets.token_hex(3)}"
            seconds, sandbox = await time_it(
                lambda: manager.acquire(chat, "bench", template)  # noqa: B023
            )
            times["acquire_new"].append(seconds)
            seconds, _ = await time_it(lambda: manager.acquire(chat, "bench", template))  # noqa: B023
            times["acquire_same"].append(seconds)
            await manager.destroy(sandbox.id)
    finally:
        for record in await manager.list():
            await manager.destroy(record.id)
        await manager.backend.release_shared()
        await manager.aclose()
    return times


def percentile(values: list[float], fraction: float) -> float:
    """The ``fraction`` quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def report(engine: dict[str, list[float]], swarm: dict[str, list[float]]) -> None:
    """Print p50/p95 of each measure on both backends and the swarm/engine ratios."""
    print(f"{'':32s} {'engine p50/p95 ms':>19s} {'swarm p50/p95 ms':>18s} {'ratio p50/p95':>15s}")
    for name, label in MEASURES.items():
        one = [1000 * x for x in engine[name]]
        many = [1000 * x for x in swarm[name]]
        p50s = statistics.median(one), statistics.median(many)
        p95s = percentile(one, 0.95), percentile(many, 0.95)
        print(
            f"{label:32s} {p50s[0]:8.0f} /{p95s[0]:8.0f} {p50s[1]:8.0f} /{p95s[1]:8.0f} "
            f"{p50s[1] / p50s[0]:6.2f}x /{p95s[1] / p95s[0]:5.2f}x"
        )


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` set for the block (the swarm backend reads
    ``DOCKER_HOST`` and its settings when it opens)."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def swarm_manager(given: str | None, template: str) -> Iterator[str]:
    """The ``DOCKER_HOST`` of the swarm to measure: ``given``, or 3 nodes started here."""
    if given:
        yield given
        return
    cluster = nodes.up(3, [get_template(template).image, PROXY_IMAGE], owner=os.getpid())
    try:
        print(f"swarm: 3 nodes of {cluster.prefix} ({cluster.timings})")
        yield cluster.manager.url
    finally:
        nodes.down(cluster)


def main() -> None:
    """Run both backends and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--template", default="vanilla")
    parser.add_argument("--manager", help="DOCKER_HOST of an existing swarm manager")
    args = parser.parse_args()
    source = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    redis, redis_url = start_redis(Path(tempfile.mkdtemp(prefix="kiln-bench-redis-")))
    try:
        base = dataclasses.replace(
            SandboxSettings.from_env(), redis_url=redis_url, warm_pool_size=0
        )
        one = dataclasses.replace(base, instance=f"bench-engine-{secrets.token_hex(3)}")
        engine = anyio.run(measure, one, args.template, args.samples)
        with swarm_manager(args.manager, args.template) as manager_url:
            many = dataclasses.replace(
                base, instance=f"bench-swarm-{secrets.token_hex(3)}", backend="swarm"
            )
            swarm_env = {"DOCKER_HOST": manager_url, "KILN_SWARM_IMAGE_SOURCE": source}
            with environment(swarm_env):
                swarm = anyio.run(measure, many, args.template, args.samples)
    finally:
        stop_redis(redis)
    print(f"template {args.template}, {args.samples} samples each, load {os.getloadavg()[0]:.1f}")
    report(engine, swarm)


if __name__ == "__main__":
    main()
