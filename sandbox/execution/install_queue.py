"""The per-sandbox install queue: one npm install at a time, with egress only while it runs.

The queue never trusts its caller: every spec is validated again with
:func:`parser.packages.validate_package_spec` and a bad one is refused with
:class:`~sandbox.errors.InstallRefused` naming it, before anything runs. Installs run in
arrival order (anyio's lock is FIFO), each as an argv (``npm install --save -- <specs>``, no
shell) inside an ``egress`` context that attaches the network for that install only.
``wait_idle`` lets commands wait until nothing is queued or running.

The queue is in-process: two processes driving the same sandbox do not see each other's
installs (one chat runs one generation at a time, so they do not).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

import anyio

from parser.errors import InvalidPackageError
from parser.packages import validate_package_spec
from sandbox.errors import CommandRefused, InstallRefused
from sandbox.execution import command_policy
from sandbox.execution.command_policy import CommandKind
from sandbox.execution.exec_stream import ExecResult, OutputSink

Runner = Callable[[Sequence[str], float, OutputSink | None], Awaitable[ExecResult]]
EgressFactory = Callable[[], AbstractAsyncContextManager[None]]
INSTALL_ARGV = ("npm", "install", "--save", "--no-audit", "--no-fund", "--")


@dataclass(frozen=True, slots=True)
class InstallResult:
    """The packages an install asked for and how npm ended."""

    packages: tuple[str, ...]
    result: ExecResult

    @property
    def ok(self) -> bool:
        """Whether npm exited 0 in time."""
        return self.result.ok


def validate_specs(specs: Sequence[str]) -> tuple[str, ...]:
    """The specs, stripped and de-duplicated in order; refuse the first invalid one by name."""
    if isinstance(specs, str):
        raise InstallRefused(f"install specs must be a list, got the string {specs!r}")
    if not specs:
        raise InstallRefused("no package specs given")
    packages: list[str] = []
    for spec in specs:
        try:
            package = validate_package_spec(spec)
        except (InvalidPackageError, AttributeError, TypeError):
            raise InstallRefused(
                f"refused package spec {spec!r}: not an npm package spec"
            ) from None
        if package not in packages:
            packages.append(package)
    return tuple(packages)


def install_argv(packages: Sequence[str]) -> list[str]:
    """The npm argv that installs and saves ``packages``."""
    return [*INSTALL_ARGV, *packages]


class InstallQueue:
    """Serial installs for one sandbox; ``runner`` executes, ``egress`` opens the network."""

    def __init__(self, runner: Runner, egress: EgressFactory, *, timeout: float) -> None:
        self._runner = runner
        self._egress = egress
        self._timeout = timeout
        self._lock = anyio.Lock()
        self._pending = 0
        self._idle = anyio.Event()
        self._idle.set()

    @property
    def idle(self) -> bool:
        """Whether no install is queued or running."""
        return self._pending == 0

    async def wait_idle(self) -> None:
        """Return once no install is queued or running."""
        while self._pending:
            await self._idle.wait()

    async def install(
        self, specs: Sequence[str], on_output: OutputSink | None = None
    ) -> InstallResult:
        """Validate ``specs``, then install and save them once earlier installs are done."""
        return await self.run_npm(install_argv(validate_specs(specs)), on_output)

    async def run_npm(
        self, argv: Sequence[str], on_output: OutputSink | None = None
    ) -> InstallResult:
        """Run an npm install argv (``npm install|ci ...``) in queue order, with egress.

        The argv is checked against the command policy again and must be an install.
        """
        checked = command_policy.check(argv)
        if checked.kind is not CommandKind.INSTALL:
            raise CommandRefused(f"not an install command: {list(argv)!r}")
        self._enter()
        try:
            async with self._lock, self._egress():
                result = await self._runner(checked.argv, self._timeout, on_output)
        finally:
            self._leave()
        return InstallResult(packages=checked.packages, result=result)

    def _enter(self) -> None:
        if self._pending == 0:
            self._idle = anyio.Event()
        self._pending += 1

    def _leave(self) -> None:
        self._pending -= 1
        if self._pending == 0:
            self._idle.set()
