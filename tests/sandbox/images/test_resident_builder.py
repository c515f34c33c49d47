"""The vite-react image's resident builder (images/vite-react/kiln-build*.mjs) in a real sandbox:
it builds exactly what ``npm run build`` builds (the same files, byte for byte, and the same
output but for the time taken and how many modules it transformed), before and after the sources
change (then incrementally: the dependencies from Rollup's cache), fails like it, starts over
when the installed packages change, ends its build when kiln cancels it, and without its
service the client builds as a new process.

kiln's machinery is out of the app's reach: the app's code runs as the same user, yet a folder
or a listener it leaves where the socket used to be (``/tmp``) or a listener on the service's
name that is not the supervisor's changes nothing: builds stay real, and a new container starts
from a clean ``/tmp``.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import docker
import pytest
from docker.models.containers import Container

from sandbox.docker_boundary import call
from sandbox.execution.exec_stream import ExecResult
from sandbox.images.templates import get_template
from sandbox.lifecycle.manager import Sandbox, SandboxManager
from sandbox.settings import LABEL
from tests.sandbox.docker_support import TestInstances
from tests.waiting import wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

TEMPLATE = get_template("vite-react")
LIMIT_SECONDS = 120.0
BUILDER_RUNNING = (
    "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done"
    " | grep -c '^[^ ]*node .*kiln-builder.mjs' || true"
)
SOCKET = "'\\0kiln-build'"  # a JavaScript string: the service's abstract name
OLD_SOCKET = "/tmp/kiln-build.sock"  # where it was, in the app's reach
LISTENING = "grep -c '@kiln-build' /proc/net/unix || true"
# A listener that answers every request "built, exit 0" at once: a fake service.
FAKE_SERVICE = (
    "require('net').createServer((c) => c.end(JSON.stringify({exit: 0}) + '\\n'))"
    ".listen(process.argv.at(-1).replace(/^@/, '\\0'))"  # @NAME: NAME in the abstract namespace
)
BREAK_SOURCE = "echo 'export default function (' >> src/App.jsx"
DIST_DIGEST = "cd /workspace && find dist -type f | sort | xargs sha256sum"
# A module of a few MB the app uses: its build takes seconds, so a cancel surely finds it running.
SLOW_BUILD = (
    "node -e \"console.log('export default [' + "
    "Array.from({length: 60000}, (_, i) => JSON.stringify('item ' + i + ' '.repeat(40)))"
    ".join(',\\n') + '];')\" > src/big.js"
    " && echo \"import big from './big.js'; console.log(big.length)\" >> src/main.jsx"
)
EARLY_BUILD_ATTEMPTS = 3  # the build must come within the service's first second
# Each build (a warm-up's round or a build) notes itself in a file and takes 3 s more.
SLOW_ROUNDS = """import { appendFileSync } from 'node:fs'
import { defineConfig } from 'vite'
import react from '@vitejs/plugin-react'

const slow = {
  name: 'slow',
  apply: 'build', // not the dev server's start
  buildStart: () => {
    appendFileSync('/tmp/builds.log', 'build\\n')
    return new Promise((resolve) => setTimeout(resolve, 3000))
  },
}
export default defineConfig({ plugins: [react(), slow] })
"""
BUILDS_SO_FAR = "cat /tmp/builds.log 2>/dev/null | wc -l"
WARMED_UP = re.compile(r"resident builder warmed up \((\d+) of (\d+) builds\)")


@pytest.fixture
async def sandbox(manager: SandboxManager) -> AsyncIterator[Sandbox]:
    """A vite-react sandbox of its own chat, destroyed afterwards."""
    acquired = await manager.acquire("chat-resident-builder", "owner-1", TEMPLATE.name)
    # The supervisor binds the build service as it starts: a request before that builds without
    # it (by design), which is not what these tests are about.
    await _until_listening(manager, acquired)
    yield acquired
    await manager.destroy(acquired.id)


async def _shell(manager: SandboxManager, sandbox: Sandbox, script: str) -> str:
    """Run ``script`` in the sandbox as its user (test set-up, not kiln's path)."""
    container = await manager.container_for(sandbox.id)
    result: Any = await call(container.exec_run, ["sh", "-c", script], user="1000")
    return str(result.output.decode())


def _comparable(result: ExecResult) -> list[str]:
    """The build's output without the lines that say how long it took and how many modules it
    transformed (the resident builder takes the dependencies from its cache)."""
    lines = result.output.splitlines()
    return [line for line in lines if not re.search(r" built in | modules transformed\.", line)]


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
        while (await _shell(manager, sandbox, LISTENING)).strip() in ("", "0"):
            await anyio.sleep(0.1)


async def _supervisor_log(manager: SandboxManager, sandbox: Sandbox) -> str:
    container = await manager.container_for(sandbox.id)
    logs: bytes = await call(container.logs)
    return logs.decode(errors="replace")


async def _same_as_npm(
    manager: SandboxManager, sandbox: Sandbox, resident: ExecResult | None = None
) -> tuple[ExecResult, ExecResult]:
    """``resident`` (or a resident build made now) built what ``npm run build`` builds; both
    builds' results."""
    if resident is None:
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
    return resident, npm


async def test_it_builds_what_npm_run_build_builds_before_and_after_a_change(
    manager: SandboxManager, sandbox: Sandbox
) -> None:
    warmed = await manager.run_builder(sandbox.id, TEMPLATE, warm=True)
    assert (warmed.exit_code, warmed.output) == (0, "")  # it returns at once ...
    await _until_builders(manager, sandbox, 1)  # ... and a builder warms up
    await _same_as_npm(manager, sandbox)
    marker = hashlib.sha256(b"changed").hexdigest()[:12]
    await _shell(manager, sandbox, f"echo 'console.log(\"{marker}\")' >> src/App.jsx")
    resident, npm = await _same_as_npm(manager, sandbox)
    assert marker in await _shell(manager, sandbox, "cat /workspace/dist/assets/*.js")
    assert await _builders(manager, sandbox) == 1  # the same builder built twice
    # ... incrementally: the dependencies came from Rollup's cache, the app was built again.
    assert 0 < _transformed(resident) < _transformed(npm)


def _transformed(result: ExecResult) -> int:
    """How many modules Vite says the build transformed (not taken from a cache)."""
    return int(re.findall(r"(\d+) modules transformed", result.output)[-1])


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
    # Both requests from inside the sandbox, back to back: the build comes within the first
    # second of the warm-up however slow the host's docker exec is. A build client that took
    # longer than that to start (Node, at load 40 in CI) built after the warm-up instead: then
    # the builder is made to go (what an install does) and the pair is sent again.
    warm, build = (shlex.join(TEMPLATE.builder_argv(warm=w)) for w in (True, False))
    stopped = "resident builder stopped (a build came early in its warm-up)"
    for attempt in range(EARLY_BUILD_ATTEMPTS):
        again = "touch package.json && " if attempt else ""
        script = f"cd /workspace && {again}{warm} && {build}"
        container = await manager.container_for(sandbox.id)
        both: Any = await call(container.exec_run, ["sh", "-c", script], user="1000")
        output = str(both.output.decode())
        resident = ExecResult((script,), both.exit_code, output, truncated=False, timed_out=False)
        await _same_as_npm(manager, sandbox, resident)
        if stopped in await _supervisor_log(manager, sandbox):
            break
    assert stopped in await _supervisor_log(manager, sandbox)


async def test_a_build_asked_for_during_the_warm_ups_rounds_waits_only_for_the_one_under_way(
    manager: SandboxManager, sandbox: Sandbox
) -> None:
    """A warm-up builds several times (V8 optimises Rollup only after a few builds); a build
    asked for meanwhile goes before the rounds left."""
    await _shell(manager, sandbox, f"cat > vite.config.js <<'EOF'\n{SLOW_ROUNDS}EOF")
    await manager.run_builder(sandbox.id, TEMPLATE, warm=True)  # answered at once
    with anyio.fail_after(LIMIT_SECONDS):  # the second round is under way, past the preemption
        while int((await _shell(manager, sandbox, BUILDS_SO_FAR)).strip()) < 2:
            await anyio.sleep(0.1)
    built = await _resident_build(manager, sandbox)
    assert built.exit_code == 0, built.output
    log = await _supervisor_log(manager, sandbox)
    warmed = WARMED_UP.search(log)
    assert warmed is not None, log
    rounds, planned = int(warmed[1]), int(warmed[2])
    assert 2 <= rounds < planned
    assert int((await _shell(manager, sandbox, BUILDS_SO_FAR)).strip()) == rounds + 1


async def test_anything_else_on_its_socket_is_dropped_and_the_supervisor_goes_on(
    manager: SandboxManager, sandbox: Sandbox
) -> None:
    """The socket is in the sandbox's /tmp, where the app's own code can reach it too."""
    container = await manager.container_for(sandbox.id)
    for junk in ("not json", '{"op": "rm -rf"}', "[]"):
        send = f"require('net').createConnection({SOCKET}).end({junk!r} + '\\n')"
        await call(container.exec_run, ["node", "-e", send], user="1000")
    resident = await _resident_build(manager, sandbox)
    assert resident.exit_code == 0, resident.output
    assert "✓ built in" in resident.output
    assert await _builders(manager, sandbox) == 1  # built by the resident builder


async def test_a_folder_where_the_socket_was_changes_nothing_and_a_new_container_has_a_clean_tmp(
    manager: SandboxManager, sandbox: Sandbox
) -> None:
    """The folder crashed the supervisor at every start of a container, /tmp outliving it."""
    script = f"require('fs').mkdirSync('{OLD_SOCKET}/inside', {{recursive: true}})"
    made = await _app_command(manager, sandbox, script)
    assert made.exit_code == 0, made.output
    await _check_builds_real(manager, sandbox)
    await call((await manager.container_for(sandbox.id)).kill)
    await manager.container_for(sandbox.id)  # a new container on the same workspace
    await _until_listening(manager, sandbox)
    assert "clean" in await _shell(manager, sandbox, "ls -A /tmp | grep -q . || echo clean")
    await _check_builds_real(manager, sandbox)


async def test_a_listener_the_app_leaves_where_the_socket_was_is_never_asked(
    manager: SandboxManager, sandbox: Sandbox
) -> None:
    """It made kiln record "build ok" while the real build failed."""
    container = await manager.container_for(sandbox.id)
    fake = ["node", "-e", FAKE_SERVICE, OLD_SOCKET]
    await call(container.exec_run, fake, user="1000", detach=True)
    with anyio.fail_after(LIMIT_SECONDS):
        while "yes" not in await _shell(manager, sandbox, f"test -S {OLD_SOCKET} && echo yes"):
            await anyio.sleep(0.1)
    await _check_builds_real(manager, sandbox)


async def test_the_app_cannot_take_the_services_name(
    manager: SandboxManager, sandbox: Sandbox
) -> None:
    """The supervisor binds its name before the dev server (the app's code) starts."""
    await _until_listening(manager, sandbox)
    taken = await _app_command(manager, sandbox, FAKE_SERVICE, "@kiln-build")
    assert taken.exit_code != 0
    assert "EADDRINUSE" in taken.output, taken.output
    await _check_builds_real(manager, sandbox)


async def _app_command(
    manager: SandboxManager, sandbox: Sandbox, script: str, *args: str
) -> ExecResult:
    """Run ``script`` as the app's own code: a file of the app run by a command of its answer."""
    await _shell(manager, sandbox, f"cat > app-script.cjs <<'EOF'\n{script}\nEOF")
    return await manager.run_command(sandbox.id, ["node", "app-script.cjs", *args])


async def _check_builds_real(manager: SandboxManager, sandbox: Sandbox) -> None:
    """A good source builds on the resident builder; a broken one fails, in words."""
    built = await _resident_build(manager, sandbox)
    assert built.exit_code == 0, built.output
    assert "✓ built in" in built.output
    assert await _builders(manager, sandbox) == 1  # built by the resident builder
    await _shell(manager, sandbox, f"cp src/App.jsx /tmp/App.jsx && {BREAK_SOURCE}")
    broken = await _resident_build(manager, sandbox)
    await _shell(manager, sandbox, "cp /tmp/App.jsx src/App.jsx && rm /tmp/App.jsx")
    assert broken.exit_code == 1, broken.output
    assert "error during build:" in broken.output


@pytest.fixture
def squatted(docker_client: docker.DockerClient, instances: TestInstances) -> Iterator[Container]:
    """A container of the image whose service name a fake listener took before the supervisor
    started: the only way the name can be another's (a race with the container's start)."""
    squat = (  # the fake, then (once it listens) the supervisor as the image starts it
        'node -e "$0" @kiln-build & until grep -q @kiln-build /proc/net/unix; do sleep 0.1; done;'
        f" exec {' '.join(TEMPLATE.dev_command)}"
    )
    container = docker_client.containers.run(
        f"kiln/sandbox-{TEMPLATE.name}:latest",
        ["sh", "-c", squat, FAKE_SERVICE],
        detach=True,
        init=True,
        user="1000:1000",
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        labels={LABEL: "resident-builder", "kiln.instance": instances.main},
    )
    try:
        logs = lambda: container.logs().decode(errors="replace")  # noqa: E731
        wait_until(
            lambda: "resident builder unavailable (EADDRINUSE)" in logs(), "the supervisor said so"
        )
        yield container
    finally:
        container.remove(force=True)


def test_a_listener_that_is_not_the_supervisors_is_not_trusted(squatted: Container) -> None:
    """The client checks that the listener it reached is the supervisor's: this one answers
    "exit 0" to anything, yet a broken source fails and a good one is built as a new process."""
    build = list(TEMPLATE.builder or ())
    squatted.exec_run(["sh", "-c", BREAK_SOURCE], user="1000")
    broken = squatted.exec_run(build, user="1000")
    assert broken.exit_code == 1, broken.output
    assert b"error during build:" in broken.output
    assert b"not the supervisor's: building as a new process" in broken.output
    squatted.exec_run(["sh", "-c", "sed -i '$d' src/App.jsx"])
    built = squatted.exec_run(build, user="1000")
    assert built.exit_code == 0, built.output
    assert "✓ built in".encode() in built.output
