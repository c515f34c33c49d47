"""Any host serves any chat (issue 28): two "hosts", each a ``kiln serve --no-worker`` and a
``kiln worker`` on a data directory of its own, share one Postgres (tests/postgres_server.py),
one Redis database, one project folder, one ``KILN_INSTANCE`` and one secret key, with the
replay provider and real sandboxes on the shared Docker engine.

- a chat made through host A is followed (SSE) through B, gets a follow-up through B run by B's
  worker (A's is stopped), and its versions, diff, zip and preview are the same through either;
- host A (API and worker) killed with SIGKILL mid-run: the stream resumes on B after the last
  id A gave (``Last-Event-ID``), B's worker takes the run over and ends it; every event is
  there once, in order, and no version or file is lost;
- a host with another secret key refuses to start, in words, with ``deployment_mismatch``.

The tests run in this order on one deployment (the second one kills host A).
"""

from __future__ import annotations

import contextlib
import io
import re
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis

from tests.app.kiln_process import LOGIN_LINK, KilnProcess, kiln_env
from tests.postgres_server import PostgresServer
from tests.sandbox.docker_support import swept_instance
from tests.servers import free_port
from tests.service.chat_api import finished, follow, new_chat, post, preview_headers

pytestmark = [pytest.mark.docker, pytest.mark.redis, pytest.mark.slow]
REDIS_DB = 1
SECRET = "one secret key for every host"
WORKER_READY = re.compile(r"worker\(s\) consuming the run queue")
CLAIM_IDLE_SECONDS = "4"  # how soon B's worker takes over the run of A's killed worker

FIRST = """<Response>
A greeting page.
<edward_sandbox project="hello" base="vite-react">
<file path="src/App.jsx">
export default function App() {
  return <h1>Hello from host A</h1>;
}
</file>
</edward_sandbox>
</Response>
<edward_done />
"""
SECOND = """<Response>
Now from host B, with a note.
<edward_sandbox project="hello" base="vite-react">
<file path="src/App.jsx">
import { NOTE } from "./note.js";

export default function App() {
  return <h1>Hello from host B: {NOTE}</h1>;
}
</file>
<file path="src/note.js">
export const NOTE = "written on B";
</file>
</edward_sandbox>
</Response>
<edward_done />
"""
LONG_LINES = 80
# Paced at the replay's 100 tokens/s: a few seconds after src/first.js is written, the long
# file is still streaming when host A is killed.
SLOW = (
    "<Response>\nThree files, slowly.\n"
    '<edward_sandbox project="hello" base="vite-react">\n'
    '<file path="src/first.js">\nexport const FIRST = 1;\n</file>\n'
    '<file path="src/long.js">\nexport const LINES = [\n'
    + "".join(f'  "line {n}: streamed while a host dies",\n' for n in range(LONG_LINES))
    + "];\n</file>\n"
    '<file path="src/last.js">\nexport const LAST = 3;\n</file>\n'
    "</edward_sandbox>\n</Response>\n<edward_done />\n"
)


@dataclass
class Host:
    """One host: a data directory, its API process and its worker process."""

    name: str
    data: Path
    port: int
    env: dict[str, str]
    logs: Path
    serve: KilnProcess | None = None
    worker: KilnProcess | None = None
    client: httpx.Client | None = None
    started: list[KilnProcess] = field(default_factory=list)

    def launch_serve(self) -> KilnProcess:
        """Start the API process (:meth:`KilnProcess.wait_for` its sign-in link)."""
        args = ["serve", "--port", str(self.port), "--data-dir", str(self.data)]
        self.serve = self._start([*args, "--no-worker", "--no-build"], "serve")
        return self.serve

    def launch_worker(self) -> KilnProcess:
        """Start the worker process (:func:`wait_ready` for it)."""
        self.worker = self._start(["worker", "--data-dir", str(self.data)], "worker")
        return self.worker

    def stop_worker(self) -> None:
        """SIGTERM the worker, as a supervisor stops it."""
        assert self.worker is not None
        assert self.worker.stop() == 0, self.worker.tail()
        self.worker = None

    def pause_worker(self, paused: bool) -> None:
        """Freeze (SIGSTOP) or thaw (SIGCONT) the worker: frozen, it takes no run."""
        assert self.worker is not None
        self.worker.process.send_signal(signal.SIGSTOP if paused else signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL the API and the worker: the host is gone at once."""
        for process in (self.serve, self.worker):
            if process is not None:
                process.process.kill()
                process.process.wait()

    def _start(self, args: list[str], role: str) -> KilnProcess:
        log = self.logs / f"{self.name}-{role}-{len(self.started)}.log"
        process = KilnProcess(args, self.env, log)
        self.started.append(process)
        return process

    def close(self) -> None:
        """Stop whatever is still running."""
        if self.client is not None:
            self.client.close()
        for process in self.started:
            with contextlib.suppress(ProcessLookupError):
                process.process.send_signal(signal.SIGCONT)  # a frozen worker hears SIGTERM
            with contextlib.suppress(AssertionError):
                process.__exit__(None, None, None)


@dataclass
class Deployment:
    """The two hosts, what they share, and the chat the tests carry on (made by the first)."""

    a: Host
    b: Host
    env: dict[str, str]
    database_url: str
    chat_id: str = ""

    def worker_of(self, run_id: str) -> str:
        """The name of the worker that ran ``run_id`` (``<host>-<pid>-<hex>``), as stored."""
        with psycopg.connect(self.database_url) as connection:
            row = connection.execute("SELECT worker FROM runs WHERE id = %s", (run_id,)).fetchone()
        assert row is not None, run_id
        return str(row[0])


def wait_ready(worker: KilnProcess) -> None:
    """Wait (under a deadline) until the worker consumes the queue."""
    deadline = time.monotonic() + 120
    while not WORKER_READY.search(worker.log.read_text(errors="replace")):
        assert worker.process.poll() is None, f"exited: {worker.tail()}"
        assert time.monotonic() < deadline, f"worker not ready: {worker.tail()}"
        time.sleep(0.2)  # polling under the deadline above


def ran_on(worker: str, host: Host) -> bool:
    """Whether the stored worker name is the current worker process of ``host``."""
    assert host.worker is not None
    return f"-{host.worker.process.pid}-" in worker


@pytest.fixture(scope="module")
def deployment(
    redis_url: str, postgres_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    """Hosts A and B, each an API and a worker, all four started at once."""
    root = tmp_path_factory.mktemp("two-hosts")
    shared_redis = redis_url.rsplit("/", 1)[0] + f"/{REDIS_DB}"
    flusher = redis.Redis.from_url(shared_redis)
    flusher.flushdb()
    flusher.close()
    recordings = root / "recordings"
    recordings.mkdir()
    for name, text in (("first", FIRST), ("second", SECOND), ("slow", SLOW)):
        (recordings / f"{name}.txt").write_text(text)
    # The shared project store: one folder every host names in KILN_PROJECTS_DIR.
    shared_projects = root / "shared-projects"
    shared_projects.mkdir()
    with (
        postgres_server.fresh_url() as database_url,
        swept_instance("test-twohosts", shared_redis) as instance,
    ):
        env = kiln_env(
            instance,
            recordings,
            KILN_DATABASE_URL=database_url,
            REDIS_URL=shared_redis,
            KILN_SECRET_KEY=SECRET,
            KILN_RUN_CLAIM_IDLE=CLAIM_IDLE_SECONDS,
            KILN_RENDER_CHECK="0",  # not what these tests are about; a browser per run is slow
            KILN_PROJECTS_DIR=str(shared_projects),
        )
        hosts = [_host(name, root, env) for name in ("a", "b")]
        try:
            yield _started(Deployment(hosts[0], hosts[1], env, database_url))
        finally:
            for host in hosts:
                host.close()


def _host(name: str, root: Path, env: dict[str, str]) -> Host:
    data = root / f"host-{name}"
    data.mkdir(mode=0o700)
    return Host(name, data, free_port(), env, root)


def _started(deployment: Deployment) -> Deployment:
    a, b = deployment.a, deployment.b
    # All at once, as a deployment's hosts come up: the first record, claim and local user win.
    serves = [a.launch_serve(), b.launch_serve()]
    workers = [a.launch_worker(), b.launch_worker()]
    link = serves[0].wait_for(LOGIN_LINK)
    serves[1].wait_for(LOGIN_LINK)
    for worker in workers:
        wait_ready(worker)
    a.client = httpx.Client(base_url=f"http://127.0.0.1:{a.port}", timeout=60)
    assert a.client.get(f"/login{link.split('/login', 1)[1]}").status_code == 303
    # The session made on A is a row of the shared database: B takes the same cookie.
    b.client = httpx.Client(
        base_url=f"http://127.0.0.1:{b.port}", timeout=60, cookies=a.client.cookies
    )
    return deployment


def project_views(client: httpx.Client, chat_id: str) -> dict[str, Any]:
    """What a host shows of the chat's project: versions, the latest diff, its zip's files."""
    versions = client.get(f"/api/chats/{chat_id}/versions").json()["versions"]
    diff = client.get(f"/api/chats/{chat_id}/versions/latest/diff").json()
    archive = client.get(f"/api/chats/{chat_id}/versions/latest/archive")
    assert archive.status_code == 200, archive.text
    with zipfile.ZipFile(io.BytesIO(archive.content)) as opened:
        files = {name: opened.read(name) for name in opened.namelist()}
    return {"versions": versions, "diff": diff, "files": files}


def preview_through(host: Host, sandbox_id: str, made_on: Host, path: str) -> httpx.Response:
    """``path`` of the sandbox's preview through ``host``, signed in with a link ``made_on``
    another host (sealed with the shared secret key)."""
    assert host.client is not None
    assert made_on.client is not None
    headers = preview_headers(made_on.client, host.client, sandbox_id, host.port)
    deadline = time.monotonic() + 120
    while True:  # the dev server may still be starting
        page = host.client.get(path, headers=headers)
        if page.status_code != 503 or time.monotonic() > deadline:
            return page
        time.sleep(0.5)  # polling under the deadline above


def test_a_chat_made_on_a_is_served_and_continued_on_b(deployment: Deployment) -> None:
    a, b = deployment.a, deployment.b
    assert a.client is not None
    assert b.client is not None
    chat_id, first_run = new_chat(a.client, "first")
    deployment.chat_id = chat_id
    first = follow(b.client, first_run)  # run by either worker, followed through B
    assert finished(first)["status"] == "completed", first[-3:]
    a.stop_worker()  # only B's worker is left: it runs the follow-up
    second_run = post(b.client, chat_id, "second")
    second = follow(a.client, second_run)
    assert finished(second)["status"] == "completed", second[-3:]
    assert ran_on(deployment.worker_of(second_run), b)
    a.launch_worker()  # for the next test, coming up meanwhile
    again = follow(b.client, second_run)  # the same stream through the other host
    assert again == second
    through_a, through_b = project_views(a.client, chat_id), project_views(b.client, chat_id)
    assert through_a == through_b
    assert [v["version"] for v in through_b["versions"]] == [1, 2]
    assert b"written on B" in through_b["files"]["src/note.js"]
    sandbox_id = b.client.get(f"/api/runs/{second_run}").json()["sandbox_id"]
    page = preview_through(b, sandbox_id, made_on=a, path="/src/App.jsx")
    assert page.status_code == 200, page.text
    assert "Hello from host B" in page.text
    restored = a.client.post(f"/api/chats/{chat_id}/versions/1/restore")
    assert restored.status_code == 201, restored.text
    # The dev server hears of the restored file through its watcher, a moment after the
    # restore answered (the page gets it as an HMR update): poll under a deadline.
    deadline = time.monotonic() + 30
    page = preview_through(a, sandbox_id, made_on=b, path="/src/App.jsx")
    while "Hello from host A" not in page.text and time.monotonic() < deadline:
        time.sleep(0.2)  # polling under the deadline above
        page = preview_through(a, sandbox_id, made_on=b, path="/src/App.jsx")
    assert "Hello from host A" in page.text


def test_host_a_killed_mid_run_the_run_ends_on_b(deployment: Deployment) -> None:
    a, b = deployment.a, deployment.b
    assert a.client is not None
    assert b.client is not None
    assert deployment.chat_id, "the first test made the chat"
    versions_before = project_views(b.client, deployment.chat_id)["versions"]
    assert a.worker is not None
    wait_ready(a.worker)
    b.pause_worker(True)  # A's worker takes the slow run
    slow_run = post(a.client, deployment.chat_id, "slow")
    before = follow(
        a.client, slow_run, stop=lambda e: e["type"] == "file_written" and "first" in e["path"]
    )
    assert ran_on(deployment.worker_of(slow_run), a)
    a.kill()
    b.pause_worker(False)
    after = follow(b.client, slow_run, after=before[-1][0])
    seqs = [seq for seq, _event in before + after]
    assert seqs == list(range(1, len(seqs) + 1)), seqs  # every event once, in order
    ending = finished(after)
    assert ending["status"] in ("completed", "failed"), ending
    if ending["status"] == "failed":  # an ending in words, never a bare exception
        errors = [event for _seq, event in after if event["type"] == "error"]
        assert errors, ending
        assert all(error["code"] != "internal_error" for error in errors), errors
    assert any(event["type"] == "run_started" for _seq, event in after), "no takeover"
    assert ran_on(deployment.worker_of(slow_run), b)
    views = project_views(b.client, deployment.chat_id)
    assert views["versions"][: len(versions_before)] == versions_before  # nothing lost
    if ending["status"] == "completed":
        assert len(views["versions"]) == len(versions_before) + 1
        assert {"src/first.js", "src/long.js", "src/last.js"} <= set(views["files"])
        assert views["files"]["src/long.js"].count(b": streamed while a host dies") == LONG_LINES


def test_a_host_with_another_secret_key_refuses_to_start(
    deployment: Deployment, tmp_path: Path
) -> None:
    env = {**deployment.env, "KILN_SECRET_KEY": "not the deployment's secret key"}
    argv = [sys.executable, "-m", "app", "serve", "--port", str(free_port())]
    argv += ["--data-dir", str(tmp_path / "host-c"), "--no-worker", "--no-build"]
    refused = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1, refused.stderr
    words = refused.stderr.strip().splitlines()[-1]
    assert words.startswith("kiln serve: KILN_SECRET_KEY differs from the one"), words
    assert words.endswith("[deployment_mismatch]")
    assert "not the deployment's secret key" not in refused.stderr
    assert "Traceback" not in refused.stderr
