"""``kiln serve`` stopped by Ctrl+C (SIGINT to its whole process group) or SIGTERM, after it built
the demo app in a real sandbox: it exits within seconds, and no container or network of its
instance is left. What a stop keeps on purpose is the workspace volume of each chat's sandbox
(its files and installed packages, recorded in the registry) and the npm registry proxy's cache:
the next start knows them (nothing orphaned: a reaper pass removes nothing) and revives a
container on the workspace with the files there.

Stopped *during* a run (kiln issue 24: a stop in the middle of a run once never exited and spun
a core), at three moments of the demo run (its files streaming, its install, its build), one
server per stop on one data directory (tests/app/stop_moments.py; bench/stops.py does twenty):
each exits 0 within the bound, leaves no process and no container or network, and the next
start serves the chats and finishes the interrupted run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from sandbox.containers.npm_proxy import proxy_volume_name
from sandbox.lifecycle.instance_claim import claim_volume_name
from tests.app.kiln_process import LOGIN_LINK, KilnProcess, hello_recordings, kiln_env
from tests.app.stop_moments import Moment, StopSequence
from tests.app.test_serve_command import finish_event, sign_in
from tests.sandbox.docker_support import DISK_ROOT, leftovers, swept_instance
from tests.servers import free_port

pytestmark = [pytest.mark.docker, pytest.mark.redis, pytest.mark.npm, pytest.mark.slow]
EXIT_LIMIT_SECONDS = 10.0
DEMO_FILE = "src/App.jsx"


@pytest.fixture
def instance(redis_url: str) -> Iterator[str]:
    """A kiln instance of the test's own; whatever is left of it is swept afterwards."""
    with swept_instance("test-stop", redis_url) as name:
        yield name


def build_demo(base: str, link: str) -> str:
    """Sign in, send the demo request (replay provider: the todo app); the sandbox's id once
    the run completed."""
    with sign_in(base, link) as client:
        chat = client.post("/api/chats", json={"title": "todo"}).json()["chat"]
        posted = client.post(
            f"/api/chats/{chat['id']}/messages", json={"content": "make me a todo app"}
        )
        assert posted.status_code == 202, posted.text
        run_id = posted.json()["run_id"]
        assert finish_event(client, run_id)["status"] == "completed"
        run = client.get(f"/api/runs/{run_id}").json()
    return str(run["sandbox_id"])


def stop_with(served: KilnProcess, signum: signal.Signals) -> int:
    """Send ``signum`` as a terminal (SIGINT: the whole group) or a supervisor (SIGTERM: the
    process) would; the exit code, which must come within the limit."""
    if signum == signal.SIGINT:
        os.killpg(served.process.pid, signum)
    else:
        served.process.send_signal(signum)
    try:
        return served.process.wait(EXIT_LIMIT_SECONDS)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"kiln did not exit on {signum.name}: {served.tail()}") from None


def kiln_cli(args: list[str], env: dict[str, str]) -> str:
    """Run ``kiln <args>`` to the end; its stdout (it must succeed)."""
    done = subprocess.run(
        [sys.executable, "-m", "app", *args], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_stopped_serve_leaves_only_workspace_volumes_and_reuses_them(
    tmp_path: Path, instance: str
) -> None:
    """The first server, which built the demo, is stopped by Ctrl+C; the second, which revived
    its sandbox, by SIGTERM (one demo build for both ways of stopping)."""
    data, port = tmp_path / "data", free_port()
    env = kiln_env(instance, hello_recordings(tmp_path / "rec"))
    args = ["serve", "--port", str(port), "--data-dir", str(data), "--no-build"]
    base, client = f"http://127.0.0.1:{port}", docker.from_env()
    try:
        with KilnProcess(args, env, tmp_path / "first.log", own_group=True) as first:
            sandbox_id = build_demo(base, first.wait_for(LOGIN_LINK))
            assert any(item.startswith("container") for item in leftovers(client, instance))
            assert stop_with(first, signal.SIGINT) == 0, first.tail()
        # Containers and networks are gone; the workspace volume and the npm proxy's cache
        # are kept on purpose.
        kept = [f"volume kiln-ws-{sandbox_id}", f"volume {proxy_volume_name(instance)}"]
        kept.append(f"volume {claim_volume_name(instance)}")  # KILN_INSTANCE is this data dir's
        if DISK_ROOT is not None:  # and its subvolume, which the volume is bound to
            kept.append(f"subvolume kiln-ws-{sandbox_id}")
        kept.sort()
        assert sorted(leftovers(client, instance)) == kept
        with KilnProcess(args, env, tmp_path / "second.log", own_group=True) as second:
            link = second.wait_for(LOGIN_LINK)
            reaped = kiln_cli(["sandbox", "reap", "--data-dir", str(data)], env)
            assert reaped.splitlines() == ["reaped 0"], reaped  # nothing orphaned
            with sign_in(base, link) as http:
                files = http.get(f"/api/sandboxes/{sandbox_id}/files")
                assert files.status_code == 200, files.text
                assert DEMO_FILE in {item["path"] for item in files.json()["files"]}
            assert stop_with(second, signal.SIGTERM) == 0, second.tail()
        assert sorted(leftovers(client, instance)) == kept
    finally:
        client.close()


MID_RUN = (Moment("sandbox_start", 2.0), Moment("done", 1.0), Moment("version", 2.0))


def test_stops_during_a_run_exit_within_the_bound_park_and_the_next_start_resumes(
    tmp_path: Path, instance: str
) -> None:
    sequence = StopSequence(tmp_path, instance)
    for number, moment in enumerate(MID_RUN):
        signum = (signal.SIGTERM, signal.SIGINT)[number % 2]
        stopped = sequence.stop_at(f"stop{number}", moment, signum)
        log = (tmp_path / f"stop{number}.log").read_text(errors="replace")[-3000:]
        assert stopped.code == 0, f"{moment}: forced or failed (code {stopped.code}): {log}"
        assert stopped.processes_left == [], moment
        assert stopped.objects_left == [], moment
    assert sequence.finish_last() == "completed"
