"""End-to-end benchmark: a message to a running app, cold and warm; prints ratios (never a test).

A real ``kiln serve`` of this checkout (on ``--port``, a temporary data directory, a private
``redis-server``, the kiln instance ``--instance``) replays the demo recording (``todo-app``) at
the replay provider's default 100 tokens/s. Each sample creates a chat with that first message
(``POST /api/chats``), follows the run's event stream and timestamps, as they arrive:

- **run started**, **sandbox ready** (when the answer first needs it), **run finished**: the
  events ``run_started``, ``sandbox_ready``, ``run_finished``;
- **first file in container**: the answer's first file read back whole from the container
  (``GET /api/sandboxes/{id}/files/{path}``, polled every 50 ms);
- **stream end**: the last event the parser made of the first turn's stream (``done`` here);
- **preview serves the app**: ``GET /api/sandboxes/{id}/preview`` says ``ready`` and, through
  the preview proxy (signed in with ``preview-login``), ``/`` and every module the answer wrote
  answer 200, ``src/App.jsx`` being the app's own (polled every 100 ms).

Each sample then sends a **follow-up** in the same chat: a short edit answer (one edit block
to ``src/App.jsx`` and ``npm run build``, the recording ``FOLLOW_UP_ANSWER`` played from a
recordings folder of the bench's own), measured the same way (the preview milestone: the
edited App is served). Its goal: "run finished <= 1.2x stream end (warm follow-up)" (kiln
issue 24 item 5): after a short answer, the user waits almost only for the build.

Printed: medians of ``--samples`` runs, in seconds after the message was posted and as a ratio
to the stream's own duration (stream end - its first event), for two servers one after the
other: **cold** (``KILN_WARM_POOL_SIZE=0``: no sandbox exists when the message is posted) and
**warm** (a warm pool of one ``vite-react`` sandbox, full before each message). Each sample's
chat is deleted afterwards, its sandbox with it. The goals "run finished <= 1.1x stream end
(warm)" (kiln issue 13) and the follow-up's are printed with the measured values, never
asserted, with ``uptime`` before and after. At the end kiln is stopped and every Docker object
of the instance removed. The server runs with ``--no-build``: build the sandbox images first
(``kiln images build``).

    python bench/e2e.py [--samples 3] [--port 8630] [--instance bench-e2e-<random>]
                        [--phases cold,warm|cold|warm] [--trace]

``--trace`` prints every event of each follow-up run (of its output lines, Vite's ``built in``)
with its arrival time.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from subprocess import Popen
from typing import Any
from urllib.parse import urlsplit

import anyio
import docker
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.providers.replay import BUILTIN_DEMOS
from app.service.embedded_redis import EmbeddedRedis
from app.tokens import count_tokens
from bench.run_events import run_events
from parser import StreamParser
from parser.events import EVENT_TYPES, FileContent, FileStart
from sandbox import get_template, probe_preview
from sandbox.lifecycle.registry import SandboxRegistry
from tests.sandbox.docker_support import sweep

DEMO = "todo-app"
PROMPT = "Build me a todo app: add todos, tick them off, remove them, clear the finished ones."
TEMPLATE = "vite-react"
APP_MODULE, APP_MARKER = "src/App.jsx", "Clear done"  # text of the demo's App, not the template's
FOLLOW_UP, FOLLOW_UP_PROMPT = "todo-app-edit", "Call the heading My todos."
FOLLOW_UP_MARKER = "My todos"  # the edited App's text
FOLLOW_UP_ANSWER = """<Response>
The heading now says "My todos".

<edward_sandbox project="todo-app" base="vite-react">
<edward_edit path="src/App.jsx">
<<<<<<< SEARCH
      <h1>Todos</h1>
=======
      <h1>My todos</h1>
>>>>>>> REPLACE
</edward_edit>
</edward_sandbox>

<edward_command command="npm" args='["run","build"]'>
</Response>
<edward_done />
"""
FOLLOW_UP_GOAL = 1.2
MODULE_SUFFIXES = (".js", ".jsx", ".css")
TOKENS_PER_SECOND = 100.0  # the replay provider's default pacing (app/providers/replay.py)
GOAL = 1.1
FILE_POLL_SECONDS, PREVIEW_POLL_SECONDS, POOL_POLL_SECONDS = 0.05, 0.1, 0.5
START_LIMIT_SECONDS, STOP_LIMIT_SECONDS = 120.0, 60.0
RUN_LIMIT_SECONDS, AFTER_RUN_LIMIT_SECONDS, POOL_LIMIT_SECONDS = 300.0, 60.0, 180.0
LOGIN_LINK = re.compile(r"http://\S+/login\?token=\S+")
# The parser's events, as the run streams them; ``error`` is left out: kiln's side effects
# report errors too, and those do not come from the provider's stream.
STREAM_TYPES = frozenset(EVENT_TYPES) - {"error"}
MILESTONES = (
    ("run_started", "run started"),
    ("sandbox_ready", "sandbox ready"),
    ("first_file", "first file in container"),
    ("stream_end", "stream end"),
    ("preview", "preview serves the app"),
    ("run_finished", "run finished"),
)


@dataclasses.dataclass(frozen=True)
class Recording:
    """What the demo answer writes, as the parser reads it, and its length in tokens."""

    files: dict[str, str]  # path -> content, in the order the answer starts them
    tokens: int
    marker: str = APP_MARKER  # text of the App this answer makes

    @property
    def first_path(self) -> str:
        """The answer's first file."""
        return next(iter(self.files))

    @property
    def modules(self) -> list[str]:
        """The files the dev server serves as modules of the app."""
        return [path for path in self.files if path.endswith(MODULE_SUFFIXES)]


def read_recording(name: str) -> Recording:
    """The built-in demo ``name``'s files and token count."""
    text = (BUILTIN_DEMOS / f"{name}.txt").read_text()
    parser, files = StreamParser(), dict[str, list[str]]()
    for event in [*parser.feed(text), *parser.close()]:
        if isinstance(event, FileStart):
            files[event.path] = []
        elif isinstance(event, FileContent):
            files[event.path].append(event.content)
    return Recording({path: "".join(parts) for path, parts in files.items()}, count_tokens(text))


@dataclasses.dataclass
class Sample:
    """One message's milestones (``time.perf_counter`` values) and how its run ended."""

    posted: float
    times: dict[str, float] = dataclasses.field(default_factory=dict)
    first_token: float | None = None
    turn_ended: bool = False
    status: str = "?"
    trace: list[tuple[float, str, str]] = dataclasses.field(default_factory=list)

    def mark(self, name: str) -> None:
        """Record ``name`` now, unless it was recorded before."""
        self.times.setdefault(name, time.perf_counter())

    def seconds(self, name: str) -> float | None:
        """``name``'s time after the message was posted."""
        return self.times[name] - self.posted if name in self.times else None

    def stream_seconds(self) -> float | None:
        """The stream's own duration: its first event to its last."""
        if self.first_token is None or "stream_end" not in self.times:
            return None
        return self.times["stream_end"] - self.first_token


def note_event(
    sample: Sample, kind: str, data: dict[str, Any], on_sandbox: Callable[[str], None]
) -> bool:
    """Timestamp one event of the run; whether it was the last."""
    now = time.perf_counter()
    sample.trace.append((now, kind, trace_detail(kind, data)))
    if kind in STREAM_TYPES and data.get("turn") == 1 and not sample.turn_ended:
        sample.first_token = sample.first_token or now
        sample.times["stream_end"] = now  # the latest so far; the turn's end freezes it
    elif kind == "turn_end" and data.get("turn") == 1:
        sample.turn_ended = True
    elif kind in ("run_started", "sandbox_ready", "run_finished"):
        sample.mark(kind)
    if kind == "sandbox_ready" and data.get("sandbox_id"):
        on_sandbox(str(data["sandbox_id"]))
    if kind == "run_finished":
        sample.status = str(data.get("status"))
        return True
    return False


def trace_detail(kind: str, data: dict[str, Any]) -> str:
    """A few words of an event for ``--trace`` (a command's argv, a file's path, a status)."""
    for key in ("argv", "path", "rule", "status", "number", "line"):
        if key in data:
            return f"{key}={str(data[key])[:60]}"
    if kind == "postgen":
        build = data.get("build") or {}
        render = data.get("render") or {}
        return f"build ok={build.get('ok')} render ok={render.get('ok')}"
    return ""


async def follow(
    api: httpx.AsyncClient, run_id: str, sample: Sample, on_sandbox: Callable[[str], None]
) -> None:
    """Read the run's event stream (SSE) to its terminal event."""
    async for kind, data in run_events(api, run_id):
        if note_event(sample, kind, data, on_sandbox):
            return


async def watch_first_file(
    api: httpx.AsyncClient, sandbox_id: str, recording: Recording, sample: Sample
) -> None:
    """Mark ``first_file`` once the answer's first file is whole in the container."""
    path = recording.first_path
    while True:
        response = await api.get(f"/api/sandboxes/{sandbox_id}/files/{path}")
        if response.status_code == 200 and response.text == recording.files[path]:
            sample.mark("first_file")
            return
        await anyio.sleep(FILE_POLL_SECONDS)


async def exchange_login(client: httpx.AsyncClient, url: str) -> tuple[str, str]:
    """Follow a one-time login link (to this server, whatever its host); ``(host, Cookie)``."""
    link = urlsplit(url)
    login = await client.get(f"{link.path}?{link.query}", headers={"host": link.netloc})
    if login.status_code >= 400 or not login.cookies:
        raise RuntimeError(f"sign-in refused: HTTP {login.status_code} {login.text[:200]}")
    return link.netloc, "; ".join(f"{name}={value}" for name, value in login.cookies.items())


async def app_served(
    api: httpx.AsyncClient, sandbox_id: str, recording: Recording, headers: dict[str, str]
) -> bool:
    """Whether the preview is ready and serves the answer's app, all of its modules."""
    state = await api.get(f"/api/sandboxes/{sandbox_id}/preview")
    if state.status_code != 200 or state.json().get("state") != "ready":
        return False
    for path in ["", *recording.modules]:
        response = await api.get(f"/{path}", headers=headers)
        if response.status_code != 200:
            return False
        if path == APP_MODULE and recording.marker not in response.text:
            return False
    return True


async def watch_preview(
    api: httpx.AsyncClient, sandbox_id: str, recording: Recording, sample: Sample
) -> None:
    """Mark ``preview`` once the preview serves the app."""
    answer = await api.post(f"/api/sandboxes/{sandbox_id}/preview-login")
    answer.raise_for_status()
    host, cookie = await exchange_login(api, answer.json()["url"])
    # The API client's session cookie is kiln's; the preview gets only its own.
    headers = {"host": host, "cookie": cookie}
    while not await app_served(api, sandbox_id, recording, headers):
        await anyio.sleep(PREVIEW_POLL_SECONDS)
    sample.mark("preview")


async def one_sample(api: httpx.AsyncClient, recording: Recording) -> tuple[Sample, Sample]:
    """Post the demo's message in a new chat and measure its run, then the follow-up's; then
    delete the chat."""
    sample = Sample(time.perf_counter())
    message = {"content": PROMPT, "provider": "replay", "model": DEMO}
    created = await api.post("/api/chats", json={"message": message})
    created.raise_for_status()
    body = created.json()
    chat = body["chat"]["id"]
    await measure_run(api, body["run_id"], recording, sample)
    follow_up = Sample(time.perf_counter())
    message = {"content": FOLLOW_UP_PROMPT, "provider": "replay", "model": FOLLOW_UP}
    posted = await api.post(f"/api/chats/{chat}/messages", json=message)
    posted.raise_for_status()
    edited = dataclasses.replace(recording, marker=FOLLOW_UP_MARKER)
    await measure_run(api, posted.json()["run_id"], edited, follow_up)
    (await api.delete(f"/api/chats/{chat}")).raise_for_status()
    return sample, follow_up


async def measure_run(
    api: httpx.AsyncClient, run_id: str, recording: Recording, sample: Sample
) -> None:
    """Follow the run to its end while watching its first file and its preview."""
    async with anyio.create_task_group() as tasks:

        def on_sandbox(sandbox_id: str) -> None:
            tasks.start_soon(watch_first_file, api, sandbox_id, recording, sample)
            tasks.start_soon(watch_preview, api, sandbox_id, recording, sample)

        with anyio.fail_after(RUN_LIMIT_SECONDS):
            await follow(api, run_id, sample, on_sandbox)
        # The watchers get a while longer; a milestone never reached stays out of the table.
        tasks.cancel_scope.deadline = anyio.current_time() + AFTER_RUN_LIMIT_SECONDS


async def wait_for_pool(redis_url: str, instance: str, warm: bool) -> None:
    """Cold: until the instance holds no sandbox. Warm: until a warm sandbox's dev server is up."""
    registry = SandboxRegistry.from_url(redis_url, instance)
    try:
        with anyio.fail_after(POOL_LIMIT_SECONDS):
            while not await pool_as_wanted(registry, warm):
                await anyio.sleep(POOL_POLL_SECONDS)
    finally:
        await registry.aclose()


async def pool_as_wanted(registry: SandboxRegistry, warm: bool) -> bool:
    """One look at the registry (and the warm sandboxes' dev servers)."""
    records = await registry.all()
    if not warm:
        return not records
    port = get_template(TEMPLATE).dev_port
    warm_ones = [r for r in records if r.state == "warm" and r.template == TEMPLATE and r.ip]
    for record in warm_ones:
        if (await probe_preview(f"http://{record.ip}:{port}", record.id)).state == "ready":
            return True
    return False


def serve_env(instance: str, redis_url: str, warm: bool, recordings: Path) -> dict[str, str]:
    """The server's environment: this instance, this Redis, the pool of this phase, the
    bench's recordings (the follow-up's answer)."""
    env = dict(os.environ)
    env.update(
        KILN_RECORDINGS_DIR=str(recordings),
        KILN_INSTANCE=instance,
        REDIS_URL=redis_url,
        KILN_WARM_POOL_SIZE="1" if warm else "0",
        KILN_WARM_POOL_MAX="1" if warm else "0",  # a pool of one, not grown by the demand
        KILN_WARM_POOL_TEMPLATES=TEMPLATE,  # no nextjs and vanilla pools loading the host
        KILN_PUBLIC_HOST="localhost",
        PYTHONUNBUFFERED="1",
    )
    return env


def start_serve(folder: Path, port: int, env: dict[str, str]) -> tuple[Popen[str], str]:
    """``kiln serve`` with its data under ``folder``, and its login link once it printed it."""
    argv = [sys.executable, "-m", "app", "serve", "--port", str(port), "--no-build"]
    argv += ["--data-dir", str(folder / "data"), "--log-level", "warning"]
    with (folder / "serve.log").open("w") as log:
        process = Popen(argv, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    found, lines = threading.Event(), list[str]()
    threading.Thread(target=drain, args=(process, lines, found), daemon=True).start()
    deadline = time.monotonic() + START_LIMIT_SECONDS
    while not found.wait(0.2):
        if process.poll() is not None or time.monotonic() > deadline:
            stop_serve(process)
            raise RuntimeError(f"kiln serve did not start; see {folder / 'serve.log'}")
    return process, next(m.group(0) for line in lines if (m := LOGIN_LINK.search(line)))


def stop_serve(process: Popen[str]) -> None:
    """SIGTERM, then wait (kill if it hangs)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_LIMIT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def drain(process: Popen[str], lines: list[str], found: threading.Event) -> None:
    """Read the server's stdout to its end (a full pipe would block it); spot the login link."""
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line)
        if LOGIN_LINK.search(line):
            found.set()


async def signed_in(port: int, login_url: str) -> httpx.AsyncClient:
    """An API client holding the session the server's one-time login link gives."""
    base = f"http://127.0.0.1:{port}"
    # trust_env=False: loopback traffic must not go through a proxy from the environment.
    async with httpx.AsyncClient(base_url=base, trust_env=False) as client:
        host, cookie = await exchange_login(client, login_url)
    headers = {"host": host, "cookie": cookie}
    return httpx.AsyncClient(base_url=base, headers=headers, timeout=60, trust_env=False)


async def run_phase(
    root: Path, args: argparse.Namespace, recording: Recording, warm: bool
) -> tuple[list[Sample], list[Sample]]:
    """Start a server for one phase (cold or warm), take its samples (first messages and
    their follow-ups), stop it and sweep."""
    folder = root / ("warm" if warm else "cold")
    recordings = folder / "recordings"
    recordings.mkdir(parents=True)
    (recordings / f"{FOLLOW_UP}.txt").write_text(FOLLOW_UP_ANSWER)
    async with EmbeddedRedis(folder / "redis-host") as redis_server:
        env = serve_env(args.instance, redis_server.url, warm, recordings)
        process, login_url = start_serve(folder, args.port, env)
        try:
            async with await signed_in(args.port, login_url) as api:
                firsts, follow_ups = [], []
                for _ in range(args.samples):
                    await wait_for_pool(redis_server.url, args.instance, warm)
                    first, follow_up = await one_sample(api, recording)
                    firsts.append(first)
                    follow_ups.append(follow_up)
                return firsts, follow_ups
        finally:
            stop_serve(process)
            client = docker.from_env()
            try:
                sweep(client, args.instance, redis_server.url)
            finally:
                client.close()


def medians(samples: list[Sample], name: str) -> tuple[float | None, float | None]:
    """Median seconds after the message and median ratio to the stream's duration."""
    pairs = [(s.seconds(name), s.stream_seconds()) for s in samples]
    found = [(sec, stream) for sec, stream in pairs if sec is not None and stream]
    if not found:
        return None, None
    return statistics.median(s for s, _ in found), statistics.median(s / d for s, d in found)


def cell(value: float | None, unit: str) -> str:
    """A table cell: the value, or ``-`` for a milestone no sample reached."""
    return "-" if value is None else f"{value:.2f}{unit}"


def report(phases: dict[str, list[Sample]], recording: Recording, loads: tuple[str, str]) -> None:
    """Print the runs, the table of medians, the goal with its measured value, and the load."""
    nominal = recording.tokens / TOKENS_PER_SECOND
    print(f"\n{DEMO}: {recording.tokens} tokens at {TOKENS_PER_SECOND:g} tokens/s", end=" ")
    print(f"(nominal {nominal:.2f} s)")
    for name, samples in phases.items():
        streams = [d for s in samples if (d := s.stream_seconds()) is not None]
        median = statistics.median(streams) if streams else None
        print(f"  {name}: runs {', '.join(s.status for s in samples)};", end=" ")
        print(f"the stream's own duration: median {cell(median, ' s')}")
    print(f"\n{'median: s after the message, x stream':<40}", end="")
    print("".join(f"{name:>18}" for name in phases))
    for key, label in MILESTONES:
        cells = (medians(samples, key) for samples in phases.values())
        print(f"{label:<40}" + "".join(f"{cell(s, ' s'):>9}{cell(x, 'x'):>9}" for s, x in cells))
    print()
    for phase, goal in (("warm", GOAL), ("warm follow-up", FOLLOW_UP_GOAL)):
        if phase not in phases:
            continue
        ratios = [
            finished / end
            for s in phases[phase]
            if (finished := s.seconds("run_finished")) and (end := s.seconds("stream_end"))
        ]
        measured = cell(statistics.median(ratios) if ratios else None, "x")
        print(f"goal: run finished <= {goal}x stream end ({phase}): measured {measured}", end=" ")
        print("(median of run finished / stream end, both from the message)")
    print(f"load before: {loads[0]}\nload after:  {loads[1]}")


def print_traces(phases: dict[str, list[Sample]]) -> None:
    """``--trace``: every event of each follow-up run (of the output, Vite's ``built in``
    line), in seconds after its message."""
    for name, samples in phases.items():
        if not name.endswith("follow-up"):
            continue
        for number, sample in enumerate(samples, 1):
            posted = time.time() - (time.perf_counter() - sample.posted)  # wall clock
            print(f"\n{name} #{number}: events, s after the message (posted at {posted:.3f})")
            for when, kind, detail in sample.trace:
                if kind != "output" or "built in" in detail:  # Vite's own build time
                    print(f"  {when - sample.posted:7.3f}  {kind:<18} {detail}")


def uptime() -> str:
    """What ``uptime`` says."""
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


async def bench(args: argparse.Namespace) -> None:
    """Both phases, then the report."""
    recording = read_recording(DEMO)
    before = uptime()
    with tempfile.TemporaryDirectory(prefix="kiln-bench-e2e-") as root:
        phases: dict[str, list[Sample]] = {}
        for name in args.phases.split(","):
            phases[name], phases[f"{name} follow-up"] = await run_phase(
                Path(root), args, recording, name == "warm"
            )
    if args.trace:
        print_traces(phases)
    report(phases, recording, (before, uptime()))


def main() -> None:
    """Parse the arguments and run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3, help="messages per phase")
    parser.add_argument("--port", type=int, default=8630, help="kiln serve's loopback port")
    parser.add_argument(
        "--phases",
        default="cold,warm",
        choices=("cold,warm", "cold", "warm"),
        help="which servers to measure (default both, one after the other)",
    )
    parser.add_argument(
        "--trace", action="store_true", help="print each follow-up run's events with times"
    )
    parser.add_argument(
        "--instance", default=f"bench-e2e-{secrets.token_hex(3)}", help="KILN_INSTANCE"
    )
    anyio.run(bench, parser.parse_args())


if __name__ == "__main__":
    main()
