"""The vite-react image's resident builder (images/vite-react/kiln-build*.mjs) in a real sandbox:
it builds exactly what ``npm run build`` builds (the same files, byte for byte, and the same
output but for the time taken), before and after the sources change, fails like it, starts over
when the installed packages change, ends its build when kiln cancels it, and without its
service the client builds as a new process.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from sandbox.containers.docker_boundary import call
from sandbox.execution.exec_stream import ExecResult
from sandbox.images.templates import get_template
from sandbox.lifecycle.manager import Sandbox, SandboxManager

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

TEMPLATE = get_template("vite-react")
LIMIT_SECONDS = 120.0
BUILDER_RUNNING = (
    "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done"
    " | grep -c '^[^ ]*node .*kiln-builder.mjs' || true"
)
SOCKET = "/tmp/kiln-build.sock"
DIST_DIGEST = "cd /workspace && find dist -type f | sort | xargs sha256sum"
# A module of a few MB the app uses: its build takes seconds, so a cancel surely finds it running.
SLOW_BUILD = (
    "node -e \"console.log('export default [' + "
    "Array.from({length: 60000}, (_, i) => JSON.stringify('item ' + i + ' '.repeat(40)))"
    ".join(',\\n') + '];')\" > src/big.js"
    " && echo \"import big from './big.js'; console.log(big.length)\" >> src/main.jsx"
)


@pytest.fixture
async def sandbox(manager: SandboxManager) -> AsyncIterator[Sandbox]:
    """A vite-react sandbox of its own chat, destroyed afterwards."""
    acquired = await manager.acquire("chat-resident-builder", "owner-1", TEMPLATE.name)
    yield acquired
    await manager.destroy(acquired.id)


async def _shell(manager: SandboxManager, sandbox: Sandbox, script: str) -> str:
    """Run ``script`` in the sandbox as its user (test set-up, not kiln's path)."""
    container = await manager.container_for(sandbox.id)
    result: Any = await call(container.exec_run, ["sh", "-c", script], user="1000")
    return str(result.output.decode())


def _comparable(result: ExecResult) -> list[str]:
    """The build's output without the line that says how long it took."""
    return [line for line in result.output.splitlines() if " built in " not in line]


async def _resident_build(manager: SandboxManager, sandbox: Sandbox) -> ExecResult:
    return await manager.run_builder(sandbox.id, TEMPLATE, warm=False)


async def _npm_build(manager: SandboxManager, sandbox: Sandbox) -> ExecResult:
    return await manager.run_command(sandbox.id, ["npm", "run", "build"])


async def _builders(manager: SandboxManager, sandbox: Sandbox) -> int:
    return int((await _shell(manager, sandbox, BUILDER_RUNNING)).strip() or 0)


async def _until_builders(manager: SandboxManager, sandbox: Sandbox, count: int) -> None:
    with anyio.fail_after(LIMIT_SECONDS):
        while await _builders(manager, sandbox) != count:
            await anyio.sleep(0.1)


async def _until_listening(manager: SandboxManager, sandbox: Sandbox) -> None:
    """Wait until the supervisor, once it has started, listens on the builder's socket."""
    with anyio.fail_after(LIMIT_SECONDS):
        while "yes" not in await _shell(manager, sandbox, f"test -S {SOCKET} && echo yes"):
            await anyio.sleep(0.1)


async def _supervisor_log(manager: SandboxManager, sandbox: Sandbox) -> str:
    container = await manager.container_for(sandbox.id)
    logs: bytes = await call(container.logs)
    return logs.decode(errors="replace")


async def _same_as_npm(manager: SandboxManager, sandbox: Sandbox) -> None:
    resident = await _resident_build(manager, sandbox)
    resident_dist = await _shell(manager, sandbox, DIST_DIGEST)
    npm = await _npm_build(manager, sandbox)
    assert (resident.exit_code, npm.exit_code) == (0, 0), resident.output
    assert resident_dist == await _shell(manager, sandbox, DIST_DIGEST)
    assert "index.html" in resident_dist
    # The same lines, and npm's header besides; stdout and stderr (Vite's warnings) reach an
    # exec as two streams, so their lines may interleave either way.
    extra = Counter(_comparable(npm))
    extra.subtract(_comparable(resident))
    assert {line: n for line, n in extra.items() if n} == {"> vite build": 1, "": 2} | {
        line: 1 for line in _comparable(npm) if line.startswith("> kiln-app@")
    }


async def test_it_builds_what_npm_run_build_builds_before_and_after_a_change(
    manager: SandboxManager, sandbox: Sandbox
) -> None:
    warmed = await manager.run_builder(sandbox.id, TEMPLATE, warm=True)
    assert (warmed.exit_code, warmed.output) == (0, "")  # it returns at once ...
    await _until_builders(manager, sandbox, 1)  # ... and a builder warms up
    await _same_as_npm(manager, sandbox)
    marker = hashlib.sha256(b"changed").hexdigest()[:12]
    await _shell(manager, sandbox, f"echo 'console.log(\"{marker}\")' >> src/App.jsx")
    await _same_as_npm(manager, sandbox)
    assert marker in await _shell(manager, sandbox, "cat /workspace/dist/assets/*.js")
    assert await _builders(manager, sandbox) == 1  # the same builder built twice


async def test_a_broken_source_fails_as_npm_run_build_fails(
    manager: SandboxManager, sandbox: Sandbox
) -> None:
    await _shell(manager, sandbox, "echo 'export default function (' >> src/App.jsx")
    resident = await _resident_build(manager, sandbox)
    npm = await _npm_build(manager, sandbox)
    assert (resident.exit_code, npm.exit_code) == (1, 1)
    for result in (resident, npm):
        assert "error during build:" in result.output
        assert "src/App.jsx" in result.output


async def test_a_builder_that_loaded_other_packages_is_replaced(
    manager: SandboxManager, sandbox: Sandbox
) -> None:
    assert (await _resident_build(manager, sandbox)).exit_code == 0
    await _shell(manager, sandbox, "touch package.json")  # what every install ends with
    assert (await _resident_build(manager, sandbox)).exit_code == 0
    assert "resident builder stopped (packages changed)" in await _supervisor_log(manager, sandbox)


async def test_a_cancelled_build_ends_with_its_builder_and_writes_nothing(
    manager: SandboxManager, sandbox: Sandbox
) -> None:
    await _shell(manager, sandbox, f"rm -rf dist && {SLOW_BUILD}")
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_resident_build, manager, sandbox)
        await _until_builders(manager, sandbox, 1)
        tasks.cancel_scope.cancel()
    await _until_builders(manager, sandbox, 0)
    assert "its build was cancelled" in await _supervisor_log(manager, sandbox)
    assert "no dist" in await _shell(manager, sandbox, "ls dist 2>/dev/null || echo no dist")


async def test_a_build_that_comes_early_in_a_warm_up_takes_its_place(
    manager: SandboxManager, sandbox: Sandbox
) -> None:
    """Waiting for the rest of a warm-up that has just begun, then building, would take longer
    than building cold at once: the warm-up is stopped and the build is still exact."""
    await _shell(manager, sandbox, SLOW_BUILD)  # a warm-up of seconds
    assert (await manager.run_builder(sandbox.id, TEMPLATE, warm=True)).exit_code == 0
    await _same_as_npm(manager, sandbox)
    log = await _supervisor_log(manager, sandbox)
    assert "resident builder stopped (a build came early in its warm-up)" in log


async def test_anything_else_on_its_socket_is_dropped_and_the_supervisor_goes_on(
    manager: SandboxManager, sandbox: Sandbox
) -> None:
    """The socket is in the sandbox's /tmp, where the app's own code can reach it too."""
    await _until_listening(manager, sandbox)
    container = await manager.container_for(sandbox.id)
    for junk in ("not json", '{"op": "rm -rf"}', "[]"):
        send = f"require('net').createConnection({SOCKET!r}).end({junk!r} + '\\n')"
        await call(container.exec_run, ["node", "-e", send], user="1000")
    resident = await _resident_build(manager, sandbox)
    assert resident.exit_code == 0, resident.output
    assert "✓ built in" in resident.output
    assert await _builders(manager, sandbox) == 1  # built by the resident builder


async def test_without_its_service_the_client_builds_as_a_new_process(
    manager: SandboxManager, sandbox: Sandbox
) -> None:
    await _until_listening(manager, sandbox)
    await _shell(manager, sandbox, f"rm {SOCKET}")
    resident = await _resident_build(manager, sandbox)
    assert resident.exit_code == 0, resident.output
    assert "✓ built in" in resident.output
    assert await _builders(manager, sandbox) == 0
