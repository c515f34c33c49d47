"""``kiln worker``: a separate process runs what a ``kiln serve --no-worker`` queued."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.cli import main
from app.cli.worker_command import worker_settings
from tests.app.kiln_process import LOGIN_LINK, KilnProcess, hello_recordings, kiln_env
from tests.sandbox.docker_support import swept_instance
from tests.servers import free_port

pytestmark = [pytest.mark.docker, pytest.mark.redis]
READY = re.compile(r"worker\(s\) consuming the run queue")


@pytest.fixture
def instance(redis_url: str) -> Iterator[str]:
    """A kiln instance of the test's own, swept afterwards."""
    with swept_instance("test-worker", redis_url) as name:
        yield name


def test_a_worker_process_runs_what_serve_queued(tmp_path: Path, instance: str) -> None:
    data, port = tmp_path / "data", free_port()
    env = kiln_env(instance, hello_recordings(tmp_path / "rec"))
    serve = ["serve", "--port", str(port), "--data-dir", str(data), "--no-worker", "--no-build"]
    with KilnProcess(serve, env, tmp_path / "serve.log") as server:
        link = server.wait_for(LOGIN_LINK)
        worker_args = ["worker", "--data-dir", str(data), "--workers", "2"]
        with (
            KilnProcess(worker_args, env, tmp_path / "worker.log") as worker,
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client,
        ):
            assert client.get(f"/login{link.split('/login', 1)[1]}").status_code == 303
            chat = client.post("/api/chats", json={}).json()["chat"]
            run = client.post(
                f"/api/chats/{chat['id']}/messages", json={"content": "hi", "model": "hello"}
            ).json()
            with client.stream("GET", f"/api/runs/{run['run_id']}/events") as response:
                data_lines = [line for line in response.iter_lines() if line.startswith("data:")]
            log = worker.log.read_text()
    assert json.loads(data_lines[-1].removeprefix("data: "))["status"] == "completed"
    assert worker.process.returncode == 0
    assert READY.search(log)


def test_without_any_redis_the_worker_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    assert main(["worker", "--data-dir", str(tmp_path)]) == 2
    assert "no Redis to share" in capsys.readouterr().err


def test_redis_url_wins_over_the_recorded_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "redis").mkdir()
    (tmp_path / "redis" / "url").write_text("unix:///elsewhere.sock?db=0\n")
    args = argparse.Namespace(data_dir=tmp_path, host=None, port=None)
    monkeypatch.delenv("REDIS_URL", raising=False)
    assert worker_settings(args).redis_url == "unix:///elsewhere.sock?db=0"
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    assert worker_settings(args).redis_url == "redis://127.0.0.1:1/0"
