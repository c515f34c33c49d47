"""A private ``redis-server`` for tests: the suite's own (tests/conftest.py's ``redis_url``) and
any module that needs one of its own (one that wants a password, for one).

Picking a free port and handing it to redis-server is a race (something else may bind it in
between; redis has no "pick one yourself" for TCP). So a start whose bind fails is retried on
another port, and a server only counts as ours when it reports our process id.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import redis

from tests.servers import free_port

START_SECONDS = 30.0
START_ATTEMPTS = 5


def _answers_as(url: str, pid: int) -> bool:
    """Whether the server at ``url`` is up and is the process ``pid`` (not a stranger)."""
    client = redis.Redis.from_url(url)
    try:
        return int(client.info("server")["process_id"]) == pid
    except redis.exceptions.RedisError:  # not up yet, or not a Redis we can talk to
        return False
    finally:
        client.close()


def _start_once(
    binary: str, folder: Path, log: Path, password: str | None
) -> tuple[subprocess.Popen[bytes], str]:
    """One attempt on a fresh port. Returns once it answers, or after it exited (the caller
    looks at ``poll()``). The URL has no password; it answers with ``password``."""
    port = free_port()
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
    argv += ["no", "--dir", str(folder), "--logfile", str(log)]
    argv += ["--requirepass", password] if password is not None else []
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"redis://127.0.0.1:{port}/0"
    signed = url if password is None else f"redis://:{quote(password, safe='')}@127.0.0.1:{port}/0"
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline and process.poll() is None:
        if _answers_as(signed, process.pid):
            return process, url
        time.sleep(0.05)  # polling under the deadline above
    if process.poll() is None:
        stop_redis(process)
        pytest.fail(f"redis-server did not answer on {url!r}: {log.read_text()!r}")
    return process, url


def start_redis(folder: Path, password: str | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """A redis-server (no persistence) in ``folder``, wanting ``password`` if one is given:
    the process and its URL (without the password). Fails the test when it cannot start."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed; the Redis tests need the real thing")
    log = folder / "redis.log"
    for _ in range(START_ATTEMPTS):
        log.write_text("")
        process, url = _start_once(binary, folder, log, password)
        if process.poll() is None:
            return process, url
        if "already in use" not in log.read_text():
            pytest.fail(f"redis-server exited at start: {log.read_text()!r}")
    pytest.fail(f"redis-server found no free port in {START_ATTEMPTS} attempts")


def stop_redis(process: subprocess.Popen[bytes]) -> None:
    """Stop a server from :func:`start_redis` (killed if it does not end in 10 s)."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
