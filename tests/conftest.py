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
# kiln, its module fixtures are built once), and the tests/web modules that use the package's
# served kiln (`kiln`, `kiln_page`, `demo_chat`) are one group, so that kiln and its demo run
# are built once; tests/cluster is one group too (its session's swarm nodes, made and loaded
# with images once). The web modules below use only a stand-in service or none: each is a group of
# its own, free to run in another process (a process that runs one starts its own browser, a
# second or two). A new web module not listed joins the served kiln's group: slower, never wrong.
# The groups known to be long go first (the rest keeps pytest's order), so that no long one
# starts last while the other processes idle. Every process has its own Redis, kiln instances
# and temporary folders (see tests/sandbox/conftest.py).
ONE_GROUP_FOLDERS = ("tests/web/", "tests/cluster/")  # tests/cluster: its swarm nodes once
WEB_MODULES_WITHOUT_THE_SERVED_KILN = frozenset(
    f"tests/web/test_{name}.py"
    for name in (
        "api",
        "cards",
        "chat_scroll",
        "composer",
        "errors",
        "layout",
        "page_problems",
        "preview_attack",
        "preview_reporter",
        "select_script",
        "stream_resume",
    )
)
LONG_GROUPS = (  # the longest, measured (--durations) on the 2-core box: 3 to 8 minutes each
    "tests/web",
    "tests/cluster",
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
    if path in WEB_MODULES_WITHOUT_THE_SERVED_KILN:
        return path
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


class GroupTimes:
    """Seconds spent per group and per xdist process (setup, call and teardown), printed after
    the run: what to move or cut when CI nears its 30 minutes (``--durations`` names tests,
    not the groups a process runs whole)."""

    def __init__(self) -> None:
        self.groups: dict[str, float] = {}
        self.processes: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Add a phase's duration to its group and process."""
        group = group_of(report.nodeid)
        self.groups[group] = self.groups.get(group, 0.0) + report.duration
        node = getattr(report, "node", None)
        process = getattr(getattr(node, "gateway", None), "id", "main")
        self.processes[process] = self.processes.get(process, 0.0) + report.duration

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        """The longest groups and each process's busy seconds."""
        if set(self.processes) <= {"main"}:
            return  # not an xdist run (the parser's second run): its own few groups say nothing
        terminalreporter.section("seconds per group (the 20 longest) and per process")
        longest = sorted(self.groups.items(), key=lambda item: -item[1])[:20]
        for group, seconds in longest:
            terminalreporter.write_line(f"{seconds:8.1f}s  {group}")
        busy = ", ".join(f"{name} {sec:.0f}s" for name, sec in sorted(self.processes.items()))
        terminalreporter.write_line(f"busy: {busy}")


def pytest_configure(config: pytest.Config) -> None:
    """Collect :class:`GroupTimes` in the process that reports (xdist's controller)."""
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(GroupTimes(), "kiln-group-times")


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
