"""Fixtures shared by the whole suite: the anyio backend and a private, throw-away Redis and
Postgres."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadGroupScheduling

from app.parser_choice import activate
from tests.postgres_server import PostgresMissing, PostgresServer
from tests.redis_server import start_redis, stop_redis

# Before any test module imports `parser`: the compiled build when fresh, as kiln itself picks
# (KILN_PARSER=python or compiled forces one; `make test` runs tests/parser under both). A forced
# `compiled` without a fresh build raises here, so the run fails rather than skips.
PARSER = activate()

# The served kiln of every end-to-end module (`instance`, `live`); loaded after the parser choice
# above, as it imports the service.
pytest_plugins = ["tests.end_to_end"]


# `make test` runs the suite in pytest-xdist processes (`-n 3 --dist loadgroup`). Every test
# has a group, and a group runs whole in one process: a module is its own group (its served
# kiln, its module fixtures are built once), tests/web is one (its session's browser, served kiln
# and demo run are built once). The groups known to be long go first (the rest keeps pytest's
# order), so that no long one starts last while the other process idles. Every process has its
# own Redis, kiln instances and temporary folders (see tests/sandbox/conftest.py).
# tests/cluster is one: its session's swarm nodes (and their loaded images) are started once.
ONE_GROUP_FOLDERS = ("tests/web/", "tests/cluster/")
LONG_GROUPS = (  # the longest, measured (--durations) on the 2-core box: 3 to 8 minutes each
    "tests/web",
    "tests/cluster",  # 3 swarm nodes, images, the contract suite and kiln end to end on them
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


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a private ``redis-server`` started for this test session (no persistence)."""
    process, url = start_redis(tmp_path_factory.mktemp("redis"))
    try:
        yield url
    finally:
        stop_redis(process)


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
