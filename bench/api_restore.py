"""Message -> restored preview through the real API (kiln issue 24 item 3); run by
``bench/projects.py`` (``--api-only`` runs this part alone).

A real ``kiln serve`` of this checkout (``bench/e2e.py``'s server: a temporary data directory,
a private Redis, its own kiln instance, the replay provider) builds the demo todo app once per
phase (``POST /api/chats`` with the ``todo-app`` recording: files, ``zustand`` installed, a
build). Then, ``--trials`` times for each way a sandbox goes:

- **reaped**: the sandbox is removed as the idle reaper does (container, volume, record);
  the next message gets a warm one from the pool (warm) or a new one (cold) and the version;
- **parked**: only its container is removed, as ``kiln serve`` stopping does (volume and
  record kept); the next message starts a container on the volume;

a short follow-up message is posted (an answer that only rewrites ``README.md``) and the clock
runs from the POST until the preview, through the preview proxy (signed in with
``preview-login``), serves the latest version: ``/``, ``src/App.jsx`` with the demo's text, and
``src/store.js`` with its ``zustand`` import pre-bundled by Vite and served. Each figure is
split by the run's events (``sandbox_ready``, ``restore`` started, the restore's install,
``restore`` done) and printed with the load average taken beside it. **warm**: a warm pool of
one ``vite-react`` sandbox, full before each message (images, npm cache and pool ready);
**cold**: no warm pool. The goal (<= 3 s warm at low load) is printed, never asserted.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import docker
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.service.embedded_redis import EmbeddedRedis
from bench.e2e import (
    exchange_login,
    serve_env,
    signed_in,
    start_serve,
    stop_serve,
    wait_for_pool,
)
from bench.run_events import run_events
from sandbox import call, connect
from sandbox.lifecycle.registry import SandboxRegistry
from tests.sandbox.docker_support import sweep

DEMO, FOLLOW_UP = "todo-app", "bench-readme"
FOLLOW_UP_ANSWER = """<Response>
The README says what the app does.

<edward_sandbox project="todo-app" base="vite-react">
<file path="README.md">
# Todos

Add todos, tick them off, clear the finished ones.
</file>
</edward_sandbox>
</Response>
<edward_done />
"""
APP_MARKER = "Clear done"  # the demo's App, not the template's
STORE_MODULE = "src/store.js"
DEPENDENCY_URL = re.compile(r"/node_modules/\.vite/deps/zustand\.js[^\"']*")
GOAL_SECONDS = 3.0
TRACE = bool(os.environ.get("KILN_BENCH_TRACE"))  # print each trial's events with their times
POLL_SECONDS, RUN_LIMIT_SECONDS = 0.05, 300.0
SPLITS = (
    ("sandbox_ready", "sandbox"),
    ("restore_started", "restore start"),
    ("install_start", "install start"),
    ("install", "install end"),
    ("restore_done", "restore done"),
)


@dataclasses.dataclass
class Trial:
    """One message to a chat whose sandbox is gone: milestones after the POST, in seconds."""

    posted: float
    load: float  # the 1-minute load average when the message was posted
    marks: dict[str, float] = dataclasses.field(default_factory=dict)
    events: list[tuple[float, str, str]] = dataclasses.field(default_factory=list)  # trace

    def mark(self, name: str) -> None:
        """Record ``name`` now, unless it was recorded before."""
        self.marks.setdefault(name, time.perf_counter() - self.posted)


def load_average() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]


async def serves_latest(api: httpx.AsyncClient, headers: dict[str, str]) -> bool:
    """Whether the preview (through kiln's proxy) serves the demo's App and its store with the
    pre-bundled ``zustand``, which only the restored version's install brings."""
    try:
        page = await api.get("/", headers=headers)
        app = await api.get("/src/App.jsx", headers=headers)
        if page.status_code != 200 or app.status_code != 200 or APP_MARKER not in app.text:
            return False
        store = await api.get(f"/{STORE_MODULE}", headers=headers)
        found = DEPENDENCY_URL.search(store.text) if store.status_code == 200 else None
        return found is not None and (await api.get(found[0], headers=headers)).status_code == 200
    except httpx.HTTPError:
        return False


async def watch_preview(api: httpx.AsyncClient, sandbox_id: str, trial: Trial) -> None:
    """Mark ``preview`` once the sandbox's preview serves the latest version."""
    answer = await api.post(f"/api/sandboxes/{sandbox_id}/preview-login")
    answer.raise_for_status()
    host, cookie = await exchange_login(api, answer.json()["url"])
    headers = {"host": host, "cookie": cookie}  # the preview's own session, not kiln's
    while not await serves_latest(api, headers):
        await anyio.sleep(POLL_SECONDS)
    trial.mark("preview")
    trial.events.append((trial.marks["preview"], "(preview serves the latest version)", ""))


def note(trial: Trial, kind: str, data: dict[str, Any]) -> str | None:
    """Timestamp one run event; the sandbox id when it is ``sandbox_ready``."""
    said = data.get("phase") or data.get("path") or data.get("line") or data.get("status") or ""
    trial.events.append((time.perf_counter() - trial.posted, kind, str(said)[:80]))
    if kind == "restore":
        trial.mark(f"restore_{data.get('phase')}")
    elif kind == "install_started" and data.get("restore"):
        trial.mark("install_start")
    elif kind == "install_finished" and "install_start" in trial.marks:
        trial.mark("install")  # the restore's install (its end has no ``restore`` field)
    elif kind in ("sandbox_ready", "run_finished"):
        trial.mark(kind)
        return str(data.get("sandbox_id") or "") or None
    return None


async def message(api: httpx.AsyncClient, chat: str, model: str) -> Trial:
    """Post a message to ``chat`` and follow its run and its preview to their ends."""
    load = load_average()
    body = {"content": "Say what the app does.", "provider": "replay", "model": model}
    trial = Trial(time.perf_counter(), load)
    posted = await api.post(f"/api/chats/{chat}/messages", json=body)
    posted.raise_for_status()
    run_id = posted.json()["run_id"]
    async with anyio.create_task_group() as tasks:
        with anyio.fail_after(RUN_LIMIT_SECONDS):
            async for kind, data in run_events(api, run_id):
                sandbox = note(trial, kind, data)
                if kind == "sandbox_ready" and sandbox:
                    tasks.start_soon(watch_preview, api, sandbox, trial)
                if kind == "run_finished":
                    break
        tasks.cancel_scope.deadline = anyio.current_time() + RUN_LIMIT_SECONDS
    return trial


async def chat_sandbox(redis_url: str, instance: str, chat: str) -> str:
    """The id of the sandbox the chat is bound to."""
    registry = SandboxRegistry.from_url(redis_url, instance)
    try:
        found = await registry.chat_sandbox(chat)
    finally:
        await registry.aclose()
    if found is None:
        raise RuntimeError(f"chat {chat!r} has no sandbox")
    return found


async def make_gone(redis_url: str, instance: str, chat: str, how: str) -> None:
    """``reaped``: container, volume and record removed (the reaper's idle removal, done
    with the manager's own ``destroy``); ``parked``: only the container (a stopped serve)."""
    sandbox_id = await chat_sandbox(redis_url, instance, chat)
    registry = SandboxRegistry.from_url(redis_url, instance)
    client = await anyio.to_thread.run_sync(connect)
    try:
        record = await registry.get(sandbox_id)
        assert record is not None
        container = await call(client.containers.get, record.container_id)
        await call(container.remove, force=True)
        if how == "reaped":
            await call((await call(client.volumes.get, record.volume)).remove, force=True)
            await registry.delete(record)
    finally:
        await registry.aclose()
        await call(client.close)


async def api_phase(root: Path, args: argparse.Namespace, warm: bool) -> dict[str, list[Trial]]:
    """A server for one phase: the demo chat, then ``--trials`` restores per way of going."""
    folder = root / ("api-warm" if warm else "api-cold")
    recordings = folder / "recordings"
    recordings.mkdir(parents=True)
    (recordings / f"{FOLLOW_UP}.txt").write_text(FOLLOW_UP_ANSWER)
    instance = f"{args.instance}-{'w' if warm else 'c'}"
    async with EmbeddedRedis(folder / "redis") as redis_server:
        env = serve_env(instance, redis_server.url, warm, recordings)
        process, login_url = start_serve(folder, args.port, env)
        try:
            async with await signed_in(args.port, login_url) as api:
                return await trials_of(api, redis_server.url, instance, args.trials, warm)
        finally:
            stop_serve(process)
            client = docker.from_env()
            try:
                sweep(client, instance, redis_server.url)
            finally:
                client.close()


async def trials_of(
    api: httpx.AsyncClient, redis_url: str, instance: str, trials: int, warm: bool
) -> dict[str, list[Trial]]:
    """The demo chat made once, then each way of going ``trials`` times."""
    created = await api.post(
        "/api/chats", json={"message": {"content": "todo", "provider": "replay", "model": DEMO}}
    )
    created.raise_for_status()
    chat = created.json()["chat"]["id"]
    first = await message_run_end(api, created.json()["run_id"])
    if first != "completed":
        raise RuntimeError(f"the demo run ended {first!r}")
    found: dict[str, list[Trial]] = {"reaped": [], "parked": []}
    for _ in range(trials):
        for how, results in found.items():
            await make_gone(redis_url, instance, chat, how)
            if warm:
                await wait_for_pool(redis_url, instance, warm)
            results.append(await message(api, chat, FOLLOW_UP))
    return found


async def message_run_end(api: httpx.AsyncClient, run_id: str) -> str:
    """Wait for the run's end; its status."""
    with anyio.fail_after(RUN_LIMIT_SECONDS):
        while True:
            run = (await api.get(f"/api/runs/{run_id}")).json()
            if run["status"] not in ("queued", "running"):
                return str(run["status"])
            await anyio.sleep(0.2)


def cell(value: float | None) -> str:
    """A table cell: seconds, or ``-`` for a milestone not reached."""
    return "-" if value is None else f"{value:6.2f}"


def report(name: str, trials: list[Trial]) -> None:
    """One line: message -> preview (median, each trial with its load), then the medians of
    the run's milestones."""
    previews = [t.marks.get("preview") for t in trials]
    reached = sorted(p for p in previews if p is not None)
    median = statistics.median(reached) if reached else None
    each = ", ".join(
        f"{cell(t.marks.get('preview')).strip()} s at load {t.load:.1f}" for t in trials
    )
    print(f"{name:<22} message -> restored preview median {cell(median)} s ({each})")
    parts = []
    for key, label in SPLITS:
        values = [t.marks[key] for t in trials if key in t.marks]
        parts.append(f"{label} {cell(statistics.median(values) if values else None).strip()}")
    print(f"{'':<22} medians after the message: {'; '.join(parts)}")
    if TRACE:
        for trial in trials:
            for at, kind, said in sorted(trial.events):
                print(f"{'':<24}{at:7.2f} {kind} {said}")
            print()


def report_phase(phase: str, ways: dict[str, list[Trial]]) -> None:
    """A phase's lines (printed as soon as it is over: a long run shows what it has)."""
    for how, trials in ways.items():
        report(f"API {how}, {phase}", trials)
    sys.stdout.flush()


def report_goal(warm_phase: dict[str, list[Trial]]) -> None:
    """The goal beside the warm figure (a reaped sandbox: the pool's sandbox takes it)."""
    warm = [t.marks["preview"] for t in warm_phase.get("reaped", []) if "preview" in t.marks]
    if warm:
        measured = statistics.median(warm)
        loads = ", ".join(f"{t.load:.1f}" for t in warm_phase["reaped"])
        print(
            f"goal: warm message -> restored preview <= {GOAL_SECONDS:g} s at low load:"
            f" measured {measured:.2f} s (reaped, at load {loads})"
        )


async def api_bench(root: Path, args: argparse.Namespace) -> None:
    """Both phases (warm first: it is the goal's), each reported when it is over."""
    for name, warm in (("warm", True), ("cold", False)):
        if name in args.api_phases:
            phase = await api_phase(root, args, warm)
            report_phase(name, phase)
            if warm:
                report_goal(phase)
