"""The install queue with a fake runner and registry: validation, strict order, the registry
resolved (the proxy made sure of) before every install."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence

import anyio
import pytest

from sandbox.containers.hardening import KILN_NPMRC
from sandbox.errors import CommandRefused, InstallRefused
from sandbox.execution.exec_stream import ExecResult, OutputSink
from sandbox.execution.install_queue import (
    NPM_FETCH_FLAGS,
    InstallQueue,
    install_argv,
    npm_argv,
    package_name,
    validate_specs,
)
from sandbox.execution.installed_check import LS_ARGV

pytestmark = pytest.mark.anyio


class FakeSandbox:
    """Records what the queue did, in order; installs can be made to fail, hang or wait."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.argvs: list[tuple[str, ...]] = []
        self.running = 0
        self.most_running = 0
        self.fail_with: BaseException | None = None
        self.hang = False
        self.listed = 0  # `npm ls` runs (the already-installed check), not in ``log``
        self.tree = ""  # what `npm ls` prints; empty: it fails (nothing installed)

    async def runner(
        self, argv: Sequence[str], timeout: float, on_output: OutputSink | None
    ) -> ExecResult:
        if tuple(argv) == LS_ARGV:
            self.listed += 1
            code = 0 if self.tree else 1
            return ExecResult(tuple(argv), code, self.tree, truncated=False, timed_out=False)
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        self.argvs.append(tuple(argv))
        self.log.append("run " + " ".join(argv[argv.index("--") + 1 :] if "--" in argv else ()))
        try:
            await anyio.sleep(0.01)  # let other installs try to overlap
            if self.hang:
                await anyio.sleep_forever()
            if self.fail_with is not None:
                raise self.fail_with
            if on_output is not None:
                await on_output(f"added {argv[-1]}")
            return ExecResult(tuple(argv), 0, "", truncated=False, timed_out=False)
        finally:
            self.running -= 1

    async def registry(self) -> str:
        self.log.append("resolve")
        return REGISTRY


@pytest.fixture
def fake() -> FakeSandbox:
    return FakeSandbox()


@pytest.fixture
def queue(fake: FakeSandbox) -> InstallQueue:
    return InstallQueue(fake.runner, fake.registry, timeout=30)


REGISTRY = "https://registry.example/"
PINNED = (
    "--ignore-scripts",
    f"--registry={REGISTRY}",
    f"--userconfig={KILN_NPMRC}",
    *NPM_FETCH_FLAGS,
)


async def test_an_install_runs_npm_against_the_registry_resolved_before_it(
    fake: FakeSandbox, queue: InstallQueue
) -> None:
    lines: list[str] = []

    async def sink(line: str) -> None:
        lines.append(line)

    installed = await queue.install([" zod@^3 ", "zod@^3", "react-router-dom"], sink)
    assert installed.ok
    assert installed.packages == ("zod@^3", "react-router-dom")
    assert installed.result.argv == (
        "npm",
        "install",
        *PINNED,
        "--save",
        "--no-audit",
        "--no-fund",
        "--",
        "zod@^3",
        "react-router-dom",
    )
    assert fake.log == ["resolve", "run zod@^3 react-router-dom"]
    assert lines == ["added react-router-dom"]


@pytest.mark.parametrize(
    ("specs", "named"),
    [
        pytest.param(
            ["zod", "https://evil.example/x.tgz"], "'https://evil.example/x.tgz'", id="url"
        ),
        pytest.param(["--registry=http://evil"], "'--registry=http://evil'", id="option"),
        pytest.param(["zod; rm -rf /"], "'zod; rm -rf /'", id="shell"),
        pytest.param(["git+ssh://x/y.git"], "'git+ssh://x/y.git'", id="git"),
        pytest.param([""], "''", id="empty-spec"),
        pytest.param([], "no package specs", id="no-specs"),
        pytest.param("zod", "must be a list", id="bare-string"),
    ],
)
async def test_invalid_specs_are_refused_by_name_before_anything_runs(
    fake: FakeSandbox, queue: InstallQueue, specs: list[str], named: str
) -> None:
    with pytest.raises(InstallRefused):
        await queue.install(specs)
    with pytest.raises(InstallRefused) as info:
        validate_specs(specs)
    assert named in str(info.value)
    assert fake.log == []


async def test_installs_run_strictly_one_at_a_time_in_arrival_order(
    fake: FakeSandbox, queue: InstallQueue
) -> None:
    async with anyio.create_task_group() as group:
        for name in ("a-pkg", "b-pkg", "c-pkg", "d-pkg"):
            group.start_soon(queue.install, [name])
            await anyio.sleep(0)  # fix the arrival order
    assert fake.most_running == 1
    assert [entry for entry in fake.log if entry.startswith("run")] == [
        "run a-pkg",
        "run b-pkg",
        "run c-pkg",
        "run d-pkg",
    ]
    assert fake.log.count("resolve") == 4


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(RuntimeError("npm crashed"), id="runner-raises"),
        pytest.param(None, id="cancelled-by-timeout"),
    ],
)
async def test_the_queue_is_idle_again_whatever_happens(
    fake: FakeSandbox, queue: InstallQueue, failure: BaseException | None
) -> None:
    fake.fail_with = failure
    fake.hang = failure is None
    with anyio.move_on_after(0.2):
        with pytest.raises(RuntimeError) if failure else contextlib.nullcontext():
            await queue.install(["zod"])
    assert fake.log == ["resolve", "run zod"]
    assert queue.idle


async def test_wait_idle_returns_once_the_queue_is_drained(
    fake: FakeSandbox, queue: InstallQueue
) -> None:
    assert queue.idle
    await queue.wait_idle()  # idle: returns at once
    done: list[str] = []

    async def waiter() -> None:
        await queue.wait_idle()
        done.append(f"idle after {len([e for e in fake.log if e.startswith('run')])} installs")

    async with anyio.create_task_group() as group:
        group.start_soon(queue.install, ["a-pkg"])
        group.start_soon(queue.install, ["b-pkg"])
        await anyio.sleep(0)
        assert not queue.idle
        group.start_soon(waiter)
    assert done == ["idle after 2 installs"]


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        pytest.param(["npm", "run", "build"], CommandRefused, id="not-an-install"),
        pytest.param(["npm", "exec", "evil"], CommandRefused, id="refused-by-policy"),
        pytest.param(["npm", "install", "file:../x"], CommandRefused, id="bad-spec"),
    ],
)
async def test_run_npm_accepts_only_install_commands(
    fake: FakeSandbox, queue: InstallQueue, argv: list[str], error: type[Exception]
) -> None:
    with pytest.raises(error):
        await queue.run_npm(argv)
    assert fake.log == []


async def test_run_npm_runs_an_allowed_ci(fake: FakeSandbox, queue: InstallQueue) -> None:
    installed = await queue.run_npm(["npm", "ci"])
    assert installed.result.argv == ("npm", "ci", *PINNED)
    assert fake.log == ["resolve", "run "]


def test_install_argv_ends_options_before_the_specs() -> None:
    assert install_argv(["zod"])[-2:] == ["--", "zod"]


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["npm", "install"], id="argument-less"),
        pytest.param(["npm", "ci"], id="ci"),
        pytest.param(["npm", "i", "-D", "zod"], id="named"),
        pytest.param(["npm", "install", "--", "vite"], id="after-double-dash"),
    ],
)
async def test_every_install_ignores_scripts_and_pins_registry_and_config(
    fake: FakeSandbox, queue: InstallQueue, argv: list[str]
) -> None:
    await queue.run_npm(argv)
    assert fake.argvs == [(*argv[:2], *PINNED, *argv[2:])]


async def test_an_allowed_package_gets_its_scripts_by_a_rebuild_of_it_alone(
    fake: FakeSandbox, queue: InstallQueue
) -> None:
    installed = await queue.install(["zod", "esbuild@^0.21"])
    assert installed.ok
    assert fake.argvs[1] == ("npm", "rebuild", *PINNED[1:], "--", "esbuild")
    assert fake.log == ["resolve", "run zod esbuild@^0.21", "run esbuild"]


def test_npm_argv_puts_kilns_flags_before_the_callers() -> None:
    assert npm_argv(["npm", "install", "--", "x"], "R")[2:4] == ["--ignore-scripts", "--registry=R"]


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        pytest.param("zod@^3", "zod", id="versioned"),
        pytest.param("zod", "zod", id="bare"),
        pytest.param("@scope/pkg@1.2.3", "@scope/pkg", id="scoped-versioned"),
        pytest.param("@scope/pkg", "@scope/pkg", id="scoped"),
    ],
)
def test_package_name(spec: str, name: str) -> None:
    assert package_name(spec) == name


def test_npm_argv_sends_every_lock_host_to_the_proxy_and_cuts_off_stalls() -> None:
    """A lock's ``resolved`` host never decides where npm goes; a stalled fetch ends in ~1 min."""
    argv = npm_argv(["npm", "ci"], "http://10.0.0.1:4873/")
    assert "--replace-registry-host=always" in argv
    timeout = next(int(a.split("=")[1]) for a in argv if a.startswith("--fetch-timeout="))
    retries = next(int(a.split("=")[1]) for a in argv if a.startswith("--fetch-retries="))
    assert timeout * (retries + 1) <= 60_000


TREE = json.dumps(
    {"name": "app", "dependencies": {"zustand": {"version": "5.0.8"}, "react": {"version": "19"}}}
)


@pytest.mark.parametrize(
    ("specs", "tree", "skipped"),
    [
        pytest.param(["zustand"], TREE, True, id="installed"),
        pytest.param(["zustand@5.0.8", "react"], TREE, True, id="installed-at-that-version"),
        pytest.param(["zustand@^4"], TREE, False, id="other-version-asked"),
        pytest.param(["zustand", "zod"], TREE, False, id="one-missing"),
        pytest.param(["zustand"], "", False, id="tree-does-not-match-package-json"),
    ],
)
async def test_an_install_of_installed_packages_is_skipped_in_words(
    fake: FakeSandbox, queue: InstallQueue, specs: list[str], tree: str, skipped: bool
) -> None:
    fake.tree = tree
    lines: list[str] = []

    async def sink(line: str) -> None:
        lines.append(line)

    installed = await queue.install(specs, sink)
    assert installed.ok
    assert fake.listed == 1
    assert installed.already_installed is skipped
    assert (fake.log == []) is skipped  # npm install did not run
    if skipped:
        assert lines == [installed.result.output]
        assert lines[0].startswith("already installed: zustand@5.0.8")
    assert queue.idle


async def test_a_bare_npm_install_is_never_skipped(fake: FakeSandbox, queue: InstallQueue) -> None:
    fake.tree = TREE
    await queue.run_npm(["npm", "install"])
    assert fake.listed == 0
    assert fake.log == ["resolve", "run "]
