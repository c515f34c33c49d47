"""Fixtures shared by the whole suite: the anyio backend and a private, throw-away Redis and
Postgres."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from xdist.remote import Producer
from xdist.scheduler import LoadGroupScheduling

from app.parser_choice import activate
from tests.postgres_server import PostgresMissing, PostgresServer
from tests.servers import free_port

# Before any test module imports `parser`: the compiled build when fresh, as kiln itself picks
# (KILN_PARSER=python or compiled forces one; `make test` runs tests/parser under both). A forced
# `compiled` without a fresh build raises here, so the run fails rather than skips.
PARSER = activate()

# The served kiln of every end-to-end module (`instance`, `live`); loaded after the parser choice
# above, as it imports the service.
pytest_plugins = ["tests.end_to_end"]

REDIS_START_SECONDS = 30.0
# Picking a free port and handing it to redis-server is a race (something else may bind it in
# between; redis has no "pick one yourself" for TCP). So a start whose bind fails is retried on
# another port, and a server only counts as ours when it reports our process id.
REDIS_START_ATTEMPTS = 5


# `make test` runs the suite in pytest-xdist processes (`-n 3 --dist loadgroup`). Every test
# has a group, and a group runs whole in one process: a module is its own group (its served
# kiln, its module fixtures are built once), tests/web is one (its session's browser, served kiln
# and demo run are built once). The groups known to be long go first (the rest keeps pytest's
# order), so that no long one starts last while the other process idles. Every process has its
# own Redis, kiln instances and temporary folders (see tests/sandbox/conftest.py).
ONE_GROUP_FOLDERS = ("tests/web/",)
LONG_GROUPS = (  # the longest, measured (--durations) on the 2-core box: 3 to 8 minutes each
    "tests/web",
    "tests/app/test_clean_stop.py",
    "tests/service/test_docker_outage.py",
    "tests/sandbox/images/test_resident_builder.py",
    "tests/app/test_serve_command.py",
    "tests/sandbox/preview/test_render_check.py",
    "tests/deploy/test_compose.py",
    "tests/sandbox/writes/test_flush.py",
    "tests/sandbox/images/test_builder.py",
    "tests/publish/test_build.py",  # newer, long too: npm builds and real servers
    "tests/api/test_text_edits.py",
    "tests/api/test_remotes.py",
)


def group_of(nodeid: str) -> str:
    """The xdist group of a test: its folder when the folder is one group, else its file."""
    path = nodeid.split("::", 1)[0]
    folder = next((f for f in ONE_GROUP_FOLDERS if path.startswith(f)), None)
    return folder.rstrip("/") if folder else path


class GroupScheduling(LoadGroupScheduling):  # type: ignore[misc]  # xdist ships no py.typed
    """xdist's ``loadgroup`` with :func:`group_of` as the group. Its own reads ``xdist_group``
    marks off the node ids, which pytest 9 no longer lets it rewrite (every test would be a
    group of its own, and a module's fixtures would be built in both processes)."""

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid)


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> GroupScheduling | None:
    """Under ``--dist loadgroup``, :class:`GroupScheduling` (any other ``--dist`` stands)."""
    return GroupScheduling(config, log) if config.getvalue("dist") == "loadgroup" else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the long groups first (see above); the sort is stable, so groups stay whole."""
    rank = {group: index for index, group in enumerate(LONG_GROUPS)}
    items.sort(key=lambda item: rank.get(group_of(item.nodeid), len(rank)))


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Async tests run on asyncio (the service's loop); trio is not a target."""
    return "asyncio"


def _answers_as(url: str, pid: int) -> bool:
    """Whether the server at ``url`` is up and is the process ``pid`` (not a stranger)."""
    client = redis.Redis.from_url(url)
    try:
        return int(client.info("server")["process_id"]) == pid
    except redis.exceptions.RedisError:  # not up yet, or not a Redis we can talk to
        return False
    finally:
        client.close()


def _start_redis(binary: str, folder: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """One attempt: a redis-server on a fresh port. Returns it once it answers, or after it
    exited (the caller looks at ``poll()``)."""
    port = free_port()
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
    argv += ["no", "--dir", str(folder), "--logfile", str(log)]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + REDIS_START_SECONDS
    while time.monotonic() < deadline and process.poll() is None:
        if _answers_as(url, process.pid):
            return process, url
        time.sleep(0.05)  # polling under the deadline above
    if process.poll() is None:
        _stop(process)
        pytest.fail(f"redis-server did not answer on {url!r}: {log.read_text()!r}")
    return process, url


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a private ``redis-server`` started for this test session (no persistence)."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed; the Redis tests need the real thing")
    folder = tmp_path_factory.mktemp("redis")
    log = folder / "redis.log"
    for _ in range(REDIS_START_ATTEMPTS):
        log.write_text("")
        process, url = _start_redis(binary, folder, log)
        if process.poll() is None:
            break
        if "already in use" not in log.read_text():
            pytest.fail(f"redis-server exited at start: {log.read_text()!r}")
    else:
        pytest.fail(f"redis-server found no free port in {REDIS_START_ATTEMPTS} attempts")
    try:
        yield url
    finally:
        _stop(process)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A private Postgres started for this test session (tests take a fresh schema each:
    :meth:`~tests.postgres_server.PostgresServer.fresh_url`)."""
    try:
        server = PostgresServer()
    except PostgresMissing as exc:
        pytest.fail(str(exc))
    try:
        server.start()
        yield server
    finally:
        server.stop()
