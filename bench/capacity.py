"""Capacity benchmark: how many idle ``vanilla`` sandboxes one host holds; prints numbers (never
a test).

Fills the host with idle sandboxes (each acquired for a chat of its own, its dev server
answering), ``--sandboxes`` of them, ``--concurrency`` at a time, and reports:

- **acquire** (a cold sandbox: container on the shared network, then its dev server answering)
  p50 and max, sampled ``--samples`` times with 0, N/2 and N other sandboxes on the host (each
  sample destroyed again);
- **memory per idle sandbox**: the host's ``MemAvailable`` drop divided by the sandboxes, and
  the containers' own memory (cgroup usage, anonymous ``rss``), with the pids they use;
- **what limits it**: how many sandboxes the memory available, the kernel's ``pid_max`` and the
  shared network's subnet would allow at those rates, and ``KILN_MAX_SANDBOXES``'s default.

Runs in its own kiln instance with an embedded Redis, one shared sandbox network (no network
per sandbox), the production memory limit, and removes every Docker object it made, also when
interrupted. Refuses to start when the memory available would not hold the sandboxes asked for
at the rate of the first ones (``--min-free-gib`` kept free). Start small:

    python bench/capacity.py --sandboxes 50
    python bench/capacity.py --sandboxes 200    # only if the 50 run says memory allows

``--admission`` measures the other side (issue 24): new chats of ``--template`` (vite-react) go
through kiln's admission (:mod:`app.runs.admission`), each sandbox made busy (a build, the
resident builder staying warm), until admission refuses; it prints whether ``MemAvailable``
(sampled every 0.2 s) stayed above the reserve. ``--headroom-gib H`` runs it at a small scale
on a shared host: the reserve is set H GiB under what is available at the start.

    python bench/capacity.py --admission --headroom-gib 2
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx
import redis.asyncio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.config import ServiceSettings
from app.errors import AdmissionRefused
from app.runs.admission import Admission
from app.service.embedded_redis import EmbeddedRedis
from sandbox import (
    HostMemory,
    Sandbox,
    SandboxManager,
    SandboxSettings,
    call,
    connect,
    get_template,
    sweep_instance,
)
from sandbox.containers.disk_quota import SandboxDisk
from sandbox.settings import default_max_sandboxes

TEMPLATE = "vanilla"
GIB, MIB = 2**30, 2**20
CGROUP_V1 = Path("/sys/fs/cgroup/memory/docker")
PIDS_V1 = Path("/sys/fs/cgroup/pids/docker")
CGROUP_V2 = Path("/sys/fs/cgroup/system.slice")
READY_LIMIT_SECONDS = 180.0


def mem_available() -> int:
    """The host's ``MemAvailable`` in bytes."""
    return HostMemory.read().available


def container_usage(container_id: str) -> tuple[int, int, int]:
    """``(cgroup memory usage, anonymous rss, pids)`` of a container (0 where unreadable)."""
    v1 = CGROUP_V1 / container_id
    if v1.is_dir():
        stat = dict(line.split() for line in (v1 / "memory.stat").read_text().splitlines())
        pids = int((PIDS_V1 / container_id / "pids.current").read_text())
        return int((v1 / "memory.usage_in_bytes").read_text()), int(stat["total_rss"]), pids
    v2 = CGROUP_V2 / f"docker-{container_id}.scope"
    if v2.is_dir():
        stat = dict(line.split() for line in (v2 / "memory.stat").read_text().splitlines())
        pids = int((v2 / "pids.current").read_text())
        return int((v2 / "memory.current").read_text()), int(stat["anon"]), pids
    return 0, 0, 0


def shim_pss(container_ids: set[str]) -> dict[str, int]:
    """The proportional memory (PSS, bytes) of each container's ``containerd-shim``."""
    found: dict[str, int] = {}
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if b"-id" not in argv or not argv[0].endswith(b"containerd-shim-runc-v2"):
                continue
            container = argv[argv.index(b"-id") + 1].decode()
            if container in container_ids:
                rollup = (proc / "smaps_rollup").read_text().splitlines()
                pss = next(line for line in rollup if line.startswith("Pss:"))
                found[container] = int(pss.split()[1]) * 1024
        except (OSError, ValueError, IndexError, StopIteration):
            continue
    return found


@dataclasses.dataclass
class Fleet:
    """The idle sandboxes the benchmark holds, and how long each acquire took."""

    manager: SandboxManager
    held: list[Sandbox] = dataclasses.field(default_factory=list)
    chats: int = 0

    async def acquire(self) -> tuple[Sandbox, float, float]:
        """A cold sandbox for a new chat, its dev server answering; (sandbox, started, ready)."""
        self.chats += 1
        start = time.perf_counter()
        sandbox = await self.manager.acquire(f"bench-chat-{self.chats}", "bench", TEMPLATE)
        started = time.perf_counter() - start
        ready = await self.manager.wait_ready(sandbox.id, READY_LIMIT_SECONDS)
        async with httpx.AsyncClient() as client:
            with anyio.fail_after(READY_LIMIT_SECONDS):
                while (await client.get(f"{ready.dev_url}/")).status_code != 200:
                    await anyio.sleep(0.1)
        await self.manager.release(sandbox.id)
        return ready, started, time.perf_counter() - start

    async def fill(self, count: int, concurrency: int) -> float:
        """Hold ``count`` sandboxes in all; the seconds it took."""
        start, limiter = time.perf_counter(), anyio.CapacityLimiter(concurrency)

        async def one() -> None:
            async with limiter:
                sandbox, _, _ = await self.acquire()
                self.held.append(sandbox)

        async with anyio.create_task_group() as group:
            for _ in range(count - len(self.held)):
                group.start_soon(one)
        return time.perf_counter() - start

    async def sample(self, samples: int) -> tuple[list[float], list[float]]:
        """Acquire times (container started, dev server answering) with the fleet as it is."""
        started, ready = [], []
        for _ in range(samples):
            sandbox, up, answered = await self.acquire()
            started.append(up)
            ready.append(answered)
            await self.manager.destroy(sandbox.id)
        return started, ready

    def usage(self) -> tuple[float, float, float, float]:
        """Mean (usage MiB, rss MiB, pids, shim PSS MiB) over the held sandboxes."""
        rows = [container_usage(sandbox.container_id) for sandbox in self.held]
        shims = shim_pss({sandbox.container_id for sandbox in self.held})
        if not rows:
            return 0.0, 0.0, 0.0, 0.0
        return (
            statistics.mean(r[0] for r in rows) / MIB,
            statistics.mean(r[1] for r in rows) / MIB,
            statistics.mean(r[2] for r in rows),
            statistics.mean(shims.values() or [0]) / MIB,
        )


def ms(values: list[float]) -> str:
    """``p50 / max`` in milliseconds."""
    return f"p50 {statistics.median(values) * 1000:7.0f} ms, max {max(values) * 1000:7.0f} ms"


async def acquire_row(fleet: Fleet, samples: int) -> None:
    """Print the acquire times with the fleet as it is now."""
    started, ready = await fleet.sample(samples)
    print(
        f"  acquire with {len(fleet.held):4d} others: container {ms(started)};"
        f" dev server answering {ms(ready)}"
    )


async def subnet_size(manager: SandboxManager) -> int:
    """How many addresses the shared sandbox network's subnet has for containers."""
    network = await call(manager.client.networks.get, manager.settings.network)
    subnet = network.attrs["IPAM"]["Config"][0]["Subnet"]
    return int(ipaddress.ip_network(subnet).num_addresses) - 3  # network, gateway, broadcast


async def measure(manager: SandboxManager, args: argparse.Namespace) -> None:
    """Fill the host in steps, sampling acquires and memory on the way (module docstring)."""
    fleet, target = Fleet(manager), args.sandboxes
    free_before = mem_available()
    print(f"host: {free_before / GIB:.1f} GiB available; memory limit {manager.settings.mem_limit}")
    await acquire_row(fleet, args.samples)
    seconds = await fleet.fill(min(10, target), args.concurrency)
    per_sandbox = (free_before - mem_available()) / len(fleet.held)
    wanted = per_sandbox * target + args.min_free_gib * GIB
    if wanted > free_before:
        print(f"  {target} sandboxes at {per_sandbox / MIB:.0f} MiB each need more than is free")
        target = int((free_before - args.min_free_gib * GIB) / per_sandbox)
        print(f"  going to {target} instead")
    seconds += await fleet.fill(target // 2, args.concurrency)
    await acquire_row(fleet, args.samples)
    seconds += await fleet.fill(target, args.concurrency)
    print(f"  filled to {len(fleet.held)} in {seconds:.0f} s ({len(fleet.held) / seconds:.2f}/s)")
    await anyio.sleep(args.settle)
    await acquire_row(fleet, args.samples)
    await report(manager, fleet, free_before)


async def report(manager: SandboxManager, fleet: Fleet, free_before: int) -> None:
    """Memory per idle sandbox and what would limit the host."""
    count, free_now = len(fleet.held), mem_available()
    per_sandbox = (free_before - free_now) / count
    usage, rss, pids, shim = fleet.usage()
    print(f"  {count} idle sandboxes held: {free_now / GIB:.1f} GiB still available")
    print(
        f"  memory per idle sandbox: {per_sandbox / MIB:.0f} MiB of host memory (MemAvailable;"
        f" other work on the host counts too); its container {usage:.0f} MiB (cgroup usage,"
        f" anonymous rss {rss:.0f} MiB) + its containerd-shim {shim:.0f} MiB (PSS); {pids:.0f} pids"
    )
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    # The larger of the two: the host's drop is noisy when other work runs on the host.
    estimate = max(per_sandbox, (usage + shim) * MIB)
    limits = {
        "memory (all available now)": count + int(free_now / estimate),
        "kernel pid_max": int(pid_max / max(pids, 1)),
        "shared network's addresses": await subnet_size(manager),
        "KILN_MAX_SANDBOXES default": default_max_sandboxes(manager.settings.mem_limit),
    }
    if manager.disk is not None:
        await disk_report(manager.disk, fleet)
    print("  what limits this host (sandboxes):")
    for what, most in sorted(limits.items(), key=lambda item: item[1]):
        print(f"    {what:<28} {most:6d}")


async def disk_report(disk: SandboxDisk, fleet: Fleet) -> None:
    """What an idle sandbox writes of its quota, and how many full quotas the disk holds (the
    quota is a limit, not a reservation: idle sandboxes write little)."""
    os.sync()  # btrfs counts a subvolume's bytes when it commits
    used = statistics.mean([(await disk.usage(s.volume))[0] for s in fleet.held])
    free = shutil.disk_usage(disk.root).free
    print(
        f"  disk per idle sandbox: {used / MIB:.1f} MiB of its {disk.quota_bytes / GIB:g} GiB"
        f" quota; the quota disk has {free / GIB:.1f} GiB free:"
        f" {int(free / disk.quota_bytes)} more sandboxes at their full quota"
    )


class MemoryWatch:
    """The lowest ``MemAvailable`` seen, sampled every 0.2 s while it runs."""

    def __init__(self) -> None:
        self.lowest = mem_available()

    async def run(self) -> None:
        """Sample until cancelled."""
        while True:
            self.lowest = min(self.lowest, mem_available())
            await anyio.sleep(0.2)


async def busy_sandbox(manager: SandboxManager, chat: str, user: str, template: str) -> str:
    """A new chat's sandbox at its busy size: dev server answering, then a build (the resident
    builder, which stays warm afterwards, where the template has one); released after."""
    sandbox = await manager.acquire(chat, user, template)
    await manager.wait_ready(sandbox.id, READY_LIMIT_SECONDS)
    spec = get_template(template)
    if spec.builder:
        result = await manager.run_builder(sandbox.id, spec, warm=False)
    else:
        result = await manager.run_command(sandbox.id, ["npm", "run", "build"])
    if result.exit_code != 0:
        print(f"  (the build in {sandbox.id} failed: exit {result.exit_code})")
    await manager.release(sandbox.id)
    return sandbox.container_id


async def admission_fill(manager: SandboxManager, redis_url: str, args: argparse.Namespace) -> None:
    """New chats of ``--template`` through kiln's admission until it refuses, each sandbox made
    busy; whether MemAvailable stayed above the reserve (issue 24)."""
    host, template = HostMemory.read(), args.template
    percent = manager.settings.memory_reserve_percent
    if args.headroom_gib is not None:  # small scale: a reserve just under what is free now
        percent = max(1.0, (host.available - args.headroom_gib * GIB) / host.total * 100)
    sandboxes = dataclasses.replace(manager.settings, memory_reserve_percent=percent)
    reserve = host.reserve(percent)
    service = ServiceSettings(Path(tempfile.gettempdir()), "bench", redis_url=redis_url)
    client = redis.asyncio.Redis.from_url(redis_url)
    admission, watch, admitted = Admission(client, service, sandboxes), MemoryWatch(), 0
    containers: list[str] = []
    print(
        f"admission: {template} sandboxes, each made busy;"
        f" {host.available / GIB:.1f} GiB available, reserve {reserve / GIB:.1f} GiB"
        f" ({percent:.1f} % of {host.total / GIB:.1f} GiB)"
    )
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(watch.run)
        while True:
            run, user, chat = f"run-{admitted}", f"user-{admitted}", f"chat-{admitted}"
            try:
                await admission.admit(run, user, chat, template)
            except AdmissionRefused as refused:
                print(f"  refused new chat {admitted + 1} ({refused.limit}): {refused}")
                break
            containers.append(await busy_sandbox(manager, chat, user, template))
            await admission.release(run, user, chat)
            admitted += 1
            usage = [container_usage(container) for container in containers]
            print(
                f"  {admitted:3d} busy: MemAvailable {mem_available() / GIB:.2f} GiB; the last one"
                f" {usage[-1][0] / MIB:.0f} MiB (cgroup; anonymous {usage[-1][1] / MIB:.0f}),"
                f" all {sum(u[0] for u in usage) / MIB:.0f} MiB",
                flush=True,
            )
        tasks.cancel_scope.cancel()
    await client.aclose()
    lowest, now = watch.lowest, mem_available()
    verdict = "above" if lowest >= reserve else "UNDER"
    print(
        f"  admitted {admitted}; MemAvailable lowest {lowest / GIB:.2f} GiB during the fill,"
        f" {now / GIB:.2f} GiB at the refusal: {verdict} the reserve of {reserve / GIB:.2f} GiB"
        f" (by {(lowest - reserve) / MIB:.0f} MiB)"
    )


async def bench(args: argparse.Namespace) -> None:
    """Run in an instance of its own; remove everything it made, whatever happens."""
    instance = f"bench-capacity-{secrets.token_hex(3)}"
    root = Path(tempfile.mkdtemp(prefix="kiln-capacity-bench-"))
    async with EmbeddedRedis(root / "redis") as redis_server:
        base = SandboxSettings.from_env()
        settings = dataclasses.replace(
            base, redis_url=redis_server.url, instance=instance, warm_pool_size=0,
            max_sandboxes=max(args.sandboxes + 1, 1000 if args.admission else 0),
        )  # fmt: skip
        manager = await SandboxManager.open(settings)
        try:
            if args.admission:
                await admission_fill(manager, redis_server.url, args)
            else:
                await measure(manager, args)
        finally:
            with anyio.CancelScope(shield=True):
                start = time.perf_counter()
                client = await anyio.to_thread.run_sync(connect)
                removed = await sweep_instance(client, instance, manager.registry, manager.disk)
                await call(client.close)
                await manager.aclose()
                seconds = time.perf_counter() - start
                print(f"cleanup: removed {len(removed)} Docker objects in {seconds:.0f} s")


def main() -> None:
    """Parse the options and run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sandboxes", type=int, default=50, help="idle sandboxes to hold (50)")
    parser.add_argument("--samples", type=int, default=5, help="acquires per sample point (5)")
    parser.add_argument("--concurrency", type=int, default=4, help="acquires at once (4)")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds before measuring")
    parser.add_argument("--min-free-gib", type=float, default=4.0, help="memory left free (4)")
    parser.add_argument(
        "--admission",
        action="store_true",
        help="instead: new chats through admission until it refuses, each sandbox busy",
    )
    parser.add_argument("--template", default="vite-react", help="for --admission (vite-react)")
    parser.add_argument(
        "--headroom-gib",
        type=float,
        default=None,
        help="for --admission at a small scale: a reserve this far under MemAvailable now",
    )
    anyio.run(bench, parser.parse_args())


if __name__ == "__main__":
    main()
