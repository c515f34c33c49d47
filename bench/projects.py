"""Projects benchmark: restoring a project into a new sandbox, and recording a version; prints
numbers (never a test).

A project is made once: the demo todo app (``app/demos/todo-app.txt``) written into a sandbox,
its ``zustand`` installed, recorded as version 1. Then, for ``--trials`` rounds each:

- **restore, cold**: no sandbox and no warm pool: acquire (provision a container), write the
  latest version, ``npm install`` (the project declares a package the template lacks), until
  the preview serves the restored version: ``/``, the demo's ``src/store.js`` and the
  ``zustand`` it imports, pre-bundled by Vite (what a message to a chat whose sandbox is gone
  waits for before its preview shows the latest version);
- **restore, warm**: the same with a warm pool of one (a started sandbox is handed out);

each split into acquire / write / install / preview. And the cost of recording a version of a
**200-file project**: the sandbox read as a tar plus the git commit, for the first version (200
added), a typical turn (5 files changed) and a turn that changed nothing (no commit).

Then **message -> restored preview through the real API** (``bench/api_restore.py``: a real
``kiln serve``, a message to a chat whose sandbox was reaped or parked, until the preview
serves the latest version), warm and cold, each figure with the load average beside it.

Runs in its own kiln instance with an embedded Redis, removes every Docker object it made.

    python bench/projects.py [--trials 3] [--files 200] [--api-only] [--port 8650]
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.projects.git_store import GitProjectStore
from app.projects.store import VersionInfo
from app.projects.sync import ProjectSync, manager_installer
from app.projects.workspace_io import write_workspace
from app.service.embedded_redis import EmbeddedRedis
from bench.api_restore import api_bench
from parser import StreamParser
from parser.events import FileContent, FileStart
from sandbox import SandboxManager, SandboxSettings, connect, sandbox_disk, sweep_instance

DEMO = Path(__file__).resolve().parents[1] / "app" / "demos" / "todo-app.txt"
TEMPLATE = "vite-react"
PREVIEW_LIMIT_SECONDS = 120.0
STORE_MODULE = "src/store.js"  # the demo's module that imports zustand
# Vite rewrites a bare import to its pre-bundled copy: what the store's import is served as.
DEPENDENCY_URL = re.compile(r"/node_modules/\.vite/deps/zustand\.js[^\"']*")


def demo_files() -> dict[str, bytes]:
    """The files the demo answer writes."""
    parser = StreamParser()
    files: dict[str, str] = {}
    for event in parser.feed(DEMO.read_text()) + parser.close():
        if isinstance(event, FileStart):
            files[event.path] = ""
        elif isinstance(event, FileContent):
            files[event.path] += event.content
    return {path: text.encode() for path, text in files.items()}


def generated_files(count: int) -> dict[str, bytes]:
    """``count`` source files of about 2 KB each, in a few folders."""
    body = "export const value = {n};\n" + "// a line of a generated module\n" * 60
    return {
        f"src/mod{n // 50}/file{n}.js": body.replace("{n}", str(n)).encode() for n in range(count)
    }


@dataclasses.dataclass
class Restore:
    """One restore's phases, in seconds."""

    acquire: float
    write: float  # reading the new workspace, writing the version
    install: float  # npm install of what package.json declares
    preview: float

    @property
    def total(self) -> float:
        """No sandbox to preview serving."""
        return self.acquire + self.write + self.install + self.preview


async def timed(work: Awaitable[Any]) -> tuple[Any, float]:
    """``work``'s result and how long it took."""
    start = time.perf_counter()
    result = await work
    return result, time.perf_counter() - start


async def serves_latest(client: httpx.AsyncClient, base: str) -> bool:
    """Whether the dev server serves the restored version: ``/``, the demo's store module and
    the ``zustand`` it imports (which only the restore's install brought)."""
    try:
        if (await client.get(f"{base}/")).status_code != 200:
            return False
        store = await client.get(f"{base}/{STORE_MODULE}")
        found = DEPENDENCY_URL.search(store.text) if store.status_code == 200 else None
        return found is not None and (await client.get(f"{base}{found[0]}")).status_code == 200
    except httpx.HTTPError:
        return False


async def wait_preview(manager: SandboxManager, sandbox_id: str) -> None:
    """Until the sandbox's dev server serves the restored version (:func:`serves_latest`)."""
    sandbox = await manager.wait_ready(sandbox_id)
    async with httpx.AsyncClient(timeout=5) as client:
        with anyio.fail_after(PREVIEW_LIMIT_SECONDS):
            while not await serves_latest(client, sandbox.dev_url):
                await anyio.sleep(0.05)


async def make_project(manager: SandboxManager, projects: GitProjectStore, chat: str) -> None:
    """Version 1 of ``chat``: the demo app with zustand installed, recorded from a sandbox."""
    sandbox = await manager.acquire(chat, "bench", TEMPLATE)
    await write_workspace(await manager.container_for(sandbox.id), demo_files())
    await manager.install(sandbox.id, ["zustand"])
    sync = ProjectSync(projects, manager, chat)
    if await sync.record(sandbox.id, VersionInfo("setup", 1)) is None:
        raise SystemExit("the setup recorded no version")
    await manager.destroy(sandbox.id)


async def restore_once(manager: SandboxManager, sync: ProjectSync, chat: str) -> Restore:
    """No sandbox -> the chat's project restored -> preview serving; then remove it."""
    sandbox, acquire = await timed(manager.acquire(chat, "bench", TEMPLATE))
    marks: dict[str, float] = {}

    async def note(kind: str, record: Any) -> None:
        """When each kind of record came first (the install's start ends the write)."""
        marks.setdefault(kind, time.perf_counter())

    start = time.perf_counter()
    restored, both = await timed(sync.restore_if_stale(sandbox.id, note))
    if restored is None or "install_start" not in marks:
        raise SystemExit(f"the new sandbox was not restored with an install: {sorted(marks)}")
    write = marks["install_start"] - start
    _, preview = await timed(wait_preview(manager, sandbox.id))
    await manager.destroy(sandbox.id)
    return Restore(acquire, write, both - write, preview)


async def restores(
    manager: SandboxManager,
    sync: ProjectSync,
    chat: str,
    trials: int,
    before: Callable[[], Awaitable[None]],
) -> list[Restore]:
    """``trials`` restores, each after ``before`` (which fills the warm pool, if any)."""
    results = []
    for _ in range(trials):
        await before()
        results.append(await restore_once(manager, sync, chat))
    return results


async def commit_costs(
    manager: SandboxManager, projects: GitProjectStore, count: int
) -> dict[str, float]:
    """Seconds to record a version of a ``count``-file project (tar read + git commit)."""
    chat = f"bench-files-{secrets.token_hex(3)}"
    sandbox = await manager.acquire(chat, "bench", TEMPLATE)
    container = await manager.container_for(sandbox.id)
    sync = ProjectSync(projects, manager, chat)
    files = generated_files(count)
    await write_workspace(container, files)
    costs: dict[str, float] = {}
    _, costs[f"first version ({count} added)"] = await timed(
        sync.record(sandbox.id, VersionInfo("b", 1))
    )
    changed = {path: data + b"// changed\n" for path, data in list(files.items())[:5]}
    await write_workspace(container, changed)
    _, costs["a turn (5 changed)"] = await timed(sync.record(sandbox.id, VersionInfo("b", 2)))
    _, costs["no change (no commit)"] = await timed(sync.record(sandbox.id, VersionInfo("b", 3)))
    in_memory = {**files, **changed, "src/extra.js": b"x\n"}
    _, costs["git commit alone (1 added)"] = await timed(
        anyio.to_thread.run_sync(projects.commit, chat, in_memory, VersionInfo("b", 4))
    )
    await manager.destroy(sandbox.id)
    return costs


def report(name: str, results: list[Restore]) -> None:
    """One line per phase: the mean total, its spread and the mean of each part."""

    def mean(pick: Callable[[Restore], float]) -> str:
        return f"{statistics.mean(pick(r) for r in results):6.2f}s"

    totals = sorted(r.total for r in results)
    spread = f"(min {totals[0]:.2f}s, max {totals[-1]:.2f}s)"
    print(
        f"{name:<15} total {mean(lambda r: r.total)} {spread} = acquire {mean(lambda r: r.acquire)}"
        f" + write {mean(lambda r: r.write)} + npm install {mean(lambda r: r.install)}"
        f" + preview {mean(lambda r: r.preview)}"
    )


async def bench(args: argparse.Namespace) -> None:
    """The whole benchmark in a temporary folder and its own kiln instance."""
    instance = f"bench-projects-{secrets.token_hex(3)}"
    args.instance = instance
    with tempfile.TemporaryDirectory(prefix="kiln-projects-bench-") as folder:
        if not args.api_only:
            await bench_in(Path(folder), instance, args)
        await api_bench(Path(folder), args)


async def bench_in(root: Path, instance: str, args: argparse.Namespace) -> None:
    """An embedded Redis, the phases, then every Docker object of ``instance`` removed."""
    async with EmbeddedRedis(root / "redis") as redis_server:
        base = SandboxSettings.from_env()
        settings = dataclasses.replace(
            base, redis_url=redis_server.url, instance=instance, warm_pool_size=0,
        )  # fmt: skip
        projects = GitProjectStore(root / "projects")
        chat = f"bench-{secrets.token_hex(3)}"
        try:
            await run_phases(settings, projects, chat, args)
        finally:
            client = await anyio.to_thread.run_sync(connect)
            await sweep_instance(client, instance, disk=sandbox_disk(settings))
            client.close()


async def run_phases(
    settings: SandboxSettings, projects: GitProjectStore, chat: str, args: argparse.Namespace
) -> None:
    """The project, the cold restores and the commit costs, then the warm restores."""
    cold = await SandboxManager.open(settings)
    try:
        await make_project(cold, projects, chat)
        sync = ProjectSync(projects, cold, chat, install=manager_installer(cold))

        async def nothing() -> None:
            """A cold restore needs no preparation."""

        report("restore, cold", await restores(cold, sync, chat, args.trials, nothing))
        costs = await commit_costs(cold, projects, args.files)
    finally:
        await cold.aclose()
    warm_settings = dataclasses.replace(
        settings, warm_pool_size=1, warm_pool_max=1, warm_pool_templates=(TEMPLATE,)
    )
    warm = await SandboxManager.open(warm_settings)
    try:
        async with warm:
            sync = ProjectSync(projects, warm, chat, install=manager_installer(warm))

            async def pool_filled() -> None:
                """Wait for a warm sandbox to take."""
                with anyio.fail_after(PREVIEW_LIMIT_SECONDS):
                    while warm.pool.available(TEMPLATE) < 1:
                        await anyio.sleep(0.1)

            report("restore, warm", await restores(warm, sync, chat, args.trials, pool_filled))
    finally:
        await warm.aclose()
    print(f"recording a version of a {args.files}-file project (sandbox tar read + git):")
    for what, seconds in costs.items():
        print(f"  {what:<28} {seconds * 1000:8.1f} ms")


def main() -> None:
    """Parse the options and run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3, help="restores per phase (3)")
    parser.add_argument("--files", type=int, default=200, help="files of the commit project (200)")
    parser.add_argument("--api-only", action="store_true", help="only message -> preview (API)")
    parser.add_argument(
        "--api-phases", default="warm,cold", help="API phases to run: warm, cold or both"
    )
    parser.add_argument("--port", type=int, default=8650, help="the API phases' kiln serve port")
    anyio.run(bench, parser.parse_args())


if __name__ == "__main__":
    main()
