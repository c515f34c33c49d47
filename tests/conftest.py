"""Fixtures shared by the whole suite: the anyio backend and a private, throw-away Redis."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Async tests run on asyncio (the service's loop); trio is not a target."""
    return "asyncio"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_for_ping(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                pytest.fail(f"redis-server exited at start: {log.read_text()!r}")
            try:
                if client.ping():
                    return
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        pytest.fail(f"redis-server did not answer on {url!r}: {log.read_text()!r}")
    finally:
        client.close()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a private ``redis-server`` started for this test session (no persistence)."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed; the Redis tests need the real thing")
    folder = tmp_path_factory.mktemp("redis")
    port = _free_port()
    log = folder / "redis.log"
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
    argv += ["no", "--dir", str(folder), "--logfile", str(log)]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        _wait_for_ping(url, process, log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
