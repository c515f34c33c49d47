"""Commands in a live sandbox: policy first, argv only, exit codes, timeouts, caps, order."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from functools import partial

import anyio
import docker
import pytest

from sandbox.docker_boundary import call
from sandbox.errors import CommandRefused
from sandbox.execution import exec_stream
from sandbox.execution.commands import run_command
from sandbox.execution.exec_stream import ExecResult, OutputSink
from sandbox.execution.host_cgroup import host_oom_kills
from sandbox.execution.install_queue import InstallQueue
from sandbox.execution.installed_check import LS_ARGV
from sandbox.lifecycle.manager import Sandbox, SandboxManager
from tests.sandbox.docker_support import sandbox_files_tar

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

SPIN = "setInterval(() => {}, 1000)\n"
CHATTY = "for (let i = 0; i < 5000; i++) console.log('line ' + i)\n"
# Memory outside V8's heap, so the kernel (not V8's own limit) stops it at the cgroup's limit.
HOG = "const kept = []; for (;;) kept.push(Buffer.alloc(1 << 20).fill(1))\n"
# Room above what the sandbox already holds (the dev server under its supervisor, ~110 MiB under
# load), so lowering the limit kills the hog, never the dev server's processes (at 160m, CI once
# found the container gone before the hog started).
HOG_LIMIT = "256m"
# A command that leaves processes behind the way daemons do: a detached child in a session of its
# own (setsid), a double fork (a subshell's background sleeper, reparented to init), the same
# with an empty environment (env -i: no variable can mark it), and one that lowered the limit
# kiln marks commands with (it may lower it, never raise it).
ESCAPE = (
    "const { spawn } = require('child_process');"
    "spawn('sleep', ['300'], { detached: true, stdio: 'ignore' }).unref();"
    "spawn('sh', ['-c', '(sleep 301 &); exit 0'], { detached: true, stdio: 'ignore' }).unref();"
    "spawn('sleep', ['302'], { detached: true, stdio: 'ignore', env: {} }).unref();"
    "spawn('sh', ['-c', '(env -i /bin/sleep 303 &); exit 0'], { detached: true, stdio: 'ignore' })"
    ".unref();"
    "spawn('sh', ['-c', 'prlimit --rttime=7:7 --pid $$ && exec sleep 304'],"
    " { detached: true, stdio: 'ignore' }).unref();"
    "setTimeout(() => process.exit(0), 500);\n"
)
LEFTOVERS = (
    "const fs = require('fs');"
    "console.log(fs.readdirSync('/proc').filter(p => /^[0-9]+$/.test(p)).filter(p => {"
    "  try { const argv = fs.readFileSync('/proc/' + p + '/cmdline', 'utf8').split('\\0');"
    "    return /sleep$/.test(argv[0]) && ['300', '301', '302', '303', '304'].includes(argv[1]) }"
    "  catch { return false } }).length)"
)
DEV_SERVER_ALIVE = (
    "const fs = require('fs');"
    "console.log(fs.readdirSync('/proc').filter(p => /^[0-9]+$/.test(p)).some(p => {"
    "  try { return fs.readFileSync('/proc/' + p + '/cmdline', 'utf8').includes('server.js') }"
    "  catch { return false } }))"
)
STILL_SPINNING = (
    "const fs = require('fs');"
    "console.log(fs.readdirSync('/proc').filter(p => /^[0-9]+$/.test(p)).some(p => {"
    "  try { return fs.readFileSync('/proc/' + p + '/cmdline', 'utf8').split('\\0')"
    "    .includes('spin.js') }"
    "  catch { return false } }))"
)


@pytest.fixture
async def sandbox(manager: SandboxManager) -> AsyncIterator[Sandbox]:
    """A sandbox of its own chat holding two scripts, destroyed afterwards."""
    acquired = await manager.acquire("chat-commands", "owner-1", "vanilla")
    container = await manager.container_for(acquired.id)
    await call(
        container.put_archive,
        "/workspace",
        sandbox_files_tar(
            {"spin.js": SPIN, "chatty.js": CHATTY, "hog.js": HOG, "escape.js": ESCAPE}
        ),
    )
    yield acquired
    await manager.destroy(acquired.id)


# A local dependency whose postinstall would leave a mark, and a .npmrc that tries to turn
# scripts back on and to send npm to a registry that does not answer.
EVIL_PACKAGE = {
    "name": "evil",
    "version": "1.0.0",
    "scripts": {"postinstall": "node -e \"require('fs').writeFileSync('/workspace/pwned', '')\""},
}
HOSTILE_NPMRC = "registry=http://127.0.0.1:9/\nignore-scripts=false\n"
APP_PACKAGE = {
    "name": "kiln-app",
    "private": True,
    "version": "0.0.0",
    "dependencies": {"evil": "file:./evil", "is-number": "7.0.0"},
}


class Lines:
    """An output sink that keeps the lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    async def __call__(self, line: str) -> None:
        self.lines.append(line)


async def test_an_allowed_command_streams_its_lines_and_exit_code(
    manager: SandboxManager, sandbox: Sandbox
) -> None:
    sink = Lines()
    result = await manager.run_command(sandbox.id, ["node", "server.js", "--check"], sink)
    assert result.ok
    assert sink.lines == ["index.html present; a static site needs no build"]
    failed = await manager.run_command(sandbox.id, ["ls", "no-such-file"])
    assert failed.exit_code == 2
    assert "no-such-file" in failed.output


async def test_a_refused_command_never_runs(
    manager: SandboxManager, sandbox: Sandbox, docker_client: docker.DockerClient
) -> None:
    for argv in (["sh", "-c", "touch /workspace/pwned"], ["npm", "exec", "--", "evil-package"]):
        with pytest.raises(CommandRefused):
            await manager.run_command(sandbox.id, argv)
    listing = await manager.run_command(sandbox.id, ["ls"])
    assert "pwned" not in listing.output.split()


async def test_a_command_past_its_timeout_is_killed(
    manager: SandboxManager, sandbox: Sandbox
) -> None:
    result = await _run(manager, sandbox, ["node", "spin.js"], command_timeout_seconds=1)
    assert result.timed_out
    assert not result.ok
    # The test's own probe (the policy would refuse reading /proc): the process is gone.
    container = await call(manager.client.containers.get, sandbox.container_id)
    probe = await call(container.exec_run, ["node", "-e", STILL_SPINNING], user="1000:1000")
    assert probe.output.decode().strip() == "false"


@pytest.fixture(params=["host", "exec"])
def cgroup_view(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How the command's OOM counter and leftover processes are found: from the host (kiln on
    the Docker host as root) or, as with a remote engine, with an exec."""
    if request.param == "exec":
        monkeypatch.setattr(exec_stream, "host_oom_kills", lambda *args: None)
        monkeypatch.setattr(exec_stream, "host_kill_leftovers", lambda *args: False)
    return str(request.param)


def _assert_view(cgroup_view: str, container_id: str) -> None:
    """The host view really answers where the test says it does (no silent fallback)."""
    if cgroup_view == "host":
        assert host_oom_kills(container_id) is not None


async def test_no_process_a_command_started_outlives_it(
    manager: SandboxManager, sandbox: Sandbox, cgroup_view: str
) -> None:
    """setsid, a double fork, an empty environment and a lowered mark: its mark still finds
    them all."""
    _assert_view(cgroup_view, sandbox.container_id)
    result = await manager.run_command(sandbox.id, ["node", "escape.js"])
    assert result.ok, result.output
    # The test's own probe (the policy would refuse reading /proc).
    container = await call(manager.client.containers.get, sandbox.container_id)
    probe = await call(container.exec_run, ["node", "-e", LEFTOVERS], user="1000:1000")
    assert probe.output.decode().strip() == "0"
    dev_server = await call(container.exec_run, ["node", "-e", DEV_SERVER_ALIVE], user="1000:1000")
    assert dev_server.output.decode().strip() == "true"  # the dev server is not a command's


async def test_a_command_killed_for_memory_is_out_of_memory_not_a_timeout(
    manager: SandboxManager, sandbox: Sandbox, cgroup_view: str
) -> None:
    container = await manager.container_for(sandbox.id)
    _assert_view(cgroup_view, container.id)
    # The test's own tool: a lower limit than the session's, so the hog dies quickly.
    await call(container.update, mem_limit=HOG_LIMIT, memswap_limit=HOG_LIMIT)
    result = await manager.run_command(sandbox.id, ["node", "hog.js"])
    assert result.exit_code == 137
    assert result.oom_killed
    assert not result.timed_out
    assert not result.ok


async def test_output_past_the_cap_is_cut_and_says_so(
    manager: SandboxManager, sandbox: Sandbox
) -> None:
    sink = Lines()
    result = await _run(manager, sandbox, ["node", "chatty.js"], sink, output_cap_bytes=1000)
    assert result.ok
    assert result.truncated
    assert sink.lines[-1].startswith("[kiln: output truncated after")
    assert sum(len(line) + 1 for line in sink.lines[:-1]) <= 1000
    assert sink.lines[0] == "line 0"


@pytest.mark.npm
async def test_npm_install_as_a_command_goes_through_the_install_queue(
    manager: SandboxManager, sandbox: Sandbox
) -> None:
    result = await manager.run_command(sandbox.id, ["npm", "install", "is-number@7.0.0"])
    assert result.ok, result.output
    assert result.argv[:2] == ("npm", "install")
    listing = await manager.run_command(sandbox.id, ["ls", "node_modules"])
    assert "is-number" in listing.output.split()


@pytest.mark.npm
async def test_an_argument_less_install_runs_no_scripts_and_ignores_the_workspace_npmrc(
    manager: SandboxManager, sandbox: Sandbox
) -> None:
    files = {
        "package.json": json.dumps(APP_PACKAGE),
        "evil/package.json": json.dumps(EVIL_PACKAGE),
        ".npmrc": HOSTILE_NPMRC,
    }
    container = await manager.container_for(sandbox.id)
    await call(container.put_archive, "/workspace", sandbox_files_tar(files))
    result = await manager.run_command(sandbox.id, ["npm", "install"])
    assert result.ok, result.output  # is-number came from kiln's registry, not the .npmrc's
    modules = await manager.run_command(sandbox.id, ["ls", "node_modules"])
    assert {"evil", "is-number"} <= set(modules.output.split())
    workspace = await manager.run_command(sandbox.id, ["ls", "-A"])
    assert "pwned" not in workspace.output.split()


async def test_a_command_waits_until_the_install_queue_is_idle(
    manager: SandboxManager, sandbox: Sandbox
) -> None:
    order: list[str] = []
    release = anyio.Event()

    async def slow_install(
        argv: Sequence[str], timeout: float, on_output: OutputSink | None
    ) -> ExecResult:
        if tuple(argv) == LS_ARGV:  # the check whether the packages are installed: they are not
            return ExecResult(tuple(argv), 1, "", truncated=False, timed_out=False)
        order.append("install started")
        await release.wait()
        order.append("install finished")
        return ExecResult(tuple(argv), 0, "", truncated=False, timed_out=False)

    queue = InstallQueue(slow_install, _registry, timeout=10)

    async def execute(
        argv: Sequence[str], timeout: float, output_cap: int, on_output: OutputSink | None
    ) -> ExecResult:
        order.append("command started")  # past the queue: about to exec
        return await manager.operations.execute(sandbox.id, argv, timeout, output_cap, on_output)

    async def command() -> None:
        await run_command(manager.settings, queue, execute, ["ls"])
        order.append("command ran")

    async with anyio.create_task_group() as group:
        group.start_soon(queue.install, ["is-number"])
        await anyio.wait_all_tasks_blocked()  # the install is running first
        group.start_soon(command)
        # Every task is blocked, and the command has not started to exec: it waits on the
        # queue (no sleep that only "should" be long enough).
        await anyio.wait_all_tasks_blocked()
        assert order == ["install started"]
        release.set()
    assert order == ["install started", "install finished", "command started", "command ran"]


async def _registry() -> str:
    return "http://registry.invalid/"


async def _run(
    manager: SandboxManager,
    sandbox: Sandbox,
    argv: list[str],
    sink: OutputSink | None = None,
    **settings: float,
) -> ExecResult:
    """Run through ``run_command`` with some settings changed for this call only."""
    return await run_command(
        replace(manager.settings, **settings),
        manager.install_queue(sandbox.id),
        partial(manager.operations.execute, sandbox.id),
        argv,
        sink,
    )
