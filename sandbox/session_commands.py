"""A session's command line: installs and commands in the background, while files stream.

Installs run as soon as they are asked for. Commands run one at a time in the order they came
(:meth:`CommandLine.queue`), each once no install is pending and every file before it is
flushed. With ``build_ahead``, the template's build (:data:`BUILD_COMMAND`) is queued silently
as soon as an answer's files are complete (:meth:`CommandLine.queue_build_ahead`):
post-generation builds every run anyway, so starting it then costs nothing, and when the answer
asks for the same build on the same files its result is handed over (output replayed) instead of
building again. Any change meanwhile (:meth:`CommandLine.changed`: a file, edit, install or
command) cancels it (its processes are killed) and the build runs again when asked. While the
answer writes code and no install is pending, the template's resident builder is asked to warm
up (:meth:`CommandLine.warm_builder`), so the build after the answer finds it warm.

A refused or failed step becomes an error record through the session's reporter, never an
exception: the stream goes on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType

import anyio
from anyio.abc import TaskGroup

from sandbox.errors import CommandRefused, SandboxError
from sandbox.execution.exec_stream import ExecResult, OutputSink
from sandbox.execution.install_queue import InstallResult
from sandbox.images.templates import BUILD_COMMAND, Template, direct_build
from sandbox.nested_exits import NestedExits
from sandbox.session_log import BuiltAhead, SessionReporter, failure_code, failure_text
from sandbox.writes.file_events import WorkspaceReader
from sandbox.writes.flush import ContainerResolver, FlushScheduler


@dataclass(frozen=True, slots=True)
class SandboxPorts:
    """What a session needs of one sandbox, bound to it (the manager provides these)."""

    resolve: ContainerResolver
    install: Callable[[Sequence[str], OutputSink | None], Awaitable[InstallResult]]
    wait_install_idle: Callable[[], Awaitable[None]]
    run_command: Callable[[Sequence[str], OutputSink | None], Awaitable[ExecResult]]
    read_workspace: WorkspaceReader
    # The template's resident builder (build, or warm up when the flag says so); None where
    # nothing serves one (the build ahead then runs the build as a new process).
    run_builder: Callable[[Template, bool, OutputSink | None], Awaitable[ExecResult]] | None = None


class CommandLine:
    """The installs and the ordered commands of one session; use as an async context manager
    (its background tasks live in it)."""

    def __init__(
        self,
        ports: SandboxPorts,
        template: Template,
        reporter: SessionReporter,
        scheduler: FlushScheduler,
        *,
        build_ahead: bool,
        read_file: WorkspaceReader | None = None,
    ) -> None:
        """Run through ``ports``, report through ``reporter``; a command waits for
        ``scheduler`` to have flushed the files before it; ``read_file`` reads a project file
        as the run left it (the sandbox's, read through ``ports``, by default)."""
        self.ports = ports
        self.template = template
        self.reporter = reporter
        self.log = reporter.log
        self.scheduler = scheduler
        self._build_ahead = build_ahead
        self._read_file = read_file or ports.read_workspace
        self._stack = NestedExits()
        self._tasks: TaskGroup | None = None
        self._installs_pending = 0
        self._installs_idle = anyio.Event()
        self._installs_idle.set()
        # One scope per running install or command: abandon() cancels these, never the task
        # group's own scope, which also holds the task that abandons (cancelled mid-close).
        self._install_scopes: set[anyio.CancelScope] = set()
        self._command_scopes: set[anyio.CancelScope] = set()
        self._last_command: anyio.Event | None = None  # set when the latest queued one is done
        # ... and the latest the answer (or post-generation) asked for: a turn waits for that
        # one, not for a build ahead after it, which goes on into the next turn if need be.
        self._last_asked: anyio.Event | None = None
        self._last_changing: anyio.Event | None = None  # ... and the latest that is no build
        self._ahead_scopes: set[anyio.CancelScope] = set()  # builds ahead queued or running
        self._ahead_scope: anyio.CancelScope | None = None  # the build ahead, while it runs
        self._built_ahead: BuiltAhead | None = None
        self._abandoned = False
        self._changes = 0  # what may have changed files, a request for the build aside
        self._installed = 0  # installs done: each may change what the resident builder loads
        self._warmed_for = -1  # ... and how many were done when it was last asked to warm up

    async def __aenter__(self) -> CommandLine:
        self._tasks = await self._stack.enter_async_context(anyio.create_task_group())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for scope in self._ahead_scopes:
            scope.cancel()  # a build ahead nobody asked for by now is of no use
        await self._stack.__aexit__(exc_type, exc, traceback)

    def queue_install(self, packages: Sequence[str]) -> None:
        """Install ``packages`` in the background (commands queued later wait for it)."""
        tasks = self._entered()
        if not packages:
            return
        if self._installs_pending == 0:
            self._installs_idle = anyio.Event()
        self._installs_pending += 1
        tasks.start_soon(self._install, tuple(packages))

    def queue(self, argv: list[str]) -> None:
        """Run ``argv`` after every command queued before it (the answer asked for it)."""
        self._queue_command(argv, ahead=False)

    def queue_build_ahead(self) -> None:
        """The answer's files are complete: start the template's build, if the session
        builds ahead."""
        if self._build_ahead:
            self._queue_command(list(BUILD_COMMAND), ahead=True)

    def changed(self) -> None:
        """Files may change (an event or a command): a build ahead running now is void."""
        self._changes += 1
        if self._ahead_scope is not None:
            self._ahead_scope.cancel()  # it builds files that are changing

    def warm_builder(self) -> None:
        """Have the resident builder warm up for the installed packages, in the background:
        once the answer writes code and no install is pending (an install after it would
        start a new builder), so that the build after the answer finds it warm."""
        if not (self._build_ahead and self.template.builder and self.ports.run_builder):
            return
        if self._installs_pending or self._warmed_for == self._installed or self._abandoned:
            return
        self._warmed_for = self._installed
        if self._tasks is not None:
            self._tasks.start_soon(self._warm_now, self.ports.run_builder)

    async def wait_asked(self) -> None:
        """Wait until every command asked for so far has run (a build ahead may go on)."""
        if self._last_asked is not None:
            await self._last_asked.wait()

    async def wait_changing(self) -> None:
        """Wait until every command but the template's build has run (they run in order:
        the earlier ones are done too)."""
        if self._last_changing is not None:
            await self._last_changing.wait()

    async def wait_installs(self) -> None:
        """Wait until no install is pending, this session's or another's on the sandbox."""
        while self._installs_pending:
            await self._installs_idle.wait()
        await self.ports.wait_install_idle()

    async def flushed(self) -> None:
        """Wait until every file handed over so far is in the container (a failure becomes
        an error record)."""
        try:
            await self.scheduler.wait_flushed()
        except SandboxError as exc:
            await self.reporter.error(exc.code, str(exc))

    def abandon(self) -> None:
        """A cancelled run: stop installs and commands, start none of those queued."""
        self._abandoned = True
        for scope in (*self._install_scopes, *self._command_scopes):
            scope.cancel()

    def _entered(self) -> TaskGroup:
        if self._tasks is None:
            raise RuntimeError("enter the session (`async with`) before handling events")
        return self._tasks

    async def _install(self, packages: tuple[str, ...]) -> None:
        with anyio.CancelScope() as scope:
            self._install_scopes.add(scope)
            if self._abandoned:  # queued, not yet started, when the run was abandoned
                scope.cancel()
            try:
                await self._install_now(packages)
            finally:
                self._install_scopes.discard(scope)

    async def _install_now(self, packages: tuple[str, ...]) -> None:
        try:
            await self.reporter.record("install_start", {"packages": list(packages)})
            result = await self.ports.install(packages, self.reporter.output)
            record = {"packages": list(result.packages), "exit_code": result.result.exit_code}
            if result.already_installed:
                record["already_installed"] = True
            self.log.installs.append(record)
            await self.reporter.record("install", record)
            if not result.ok:
                code = failure_code(result.result, "install_failed")
                await self.reporter.error(code, failure_text(result.result))
        except SandboxError as exc:
            await self.reporter.error(exc.code, str(exc))
        finally:
            self._installs_pending -= 1
            self._installed += 1
            if self._installs_pending == 0:
                self._installs_idle.set()
                self.warm_builder()

    async def _warm_now(self, run_builder: Callable[..., Awaitable[ExecResult]]) -> None:
        with contextlib.suppress(SandboxError):  # only speed is lost: builds work without it
            await run_builder(self.template, True, None)

    def _queue_command(self, argv: list[str], *, ahead: bool) -> None:
        tasks = self._entered()
        previous, self._last_command = self._last_command, anyio.Event()
        if not ahead:
            self._last_asked = self._last_command
        if tuple(argv) != BUILD_COMMAND:
            self._last_changing = self._last_command
        tasks.start_soon(self._command_in_turn, argv, previous, self._last_command, ahead)

    async def _command_in_turn(
        self, argv: list[str], previous: anyio.Event | None, done: anyio.Event, ahead: bool
    ) -> None:
        """Run ``argv`` once the command queued before it is done."""
        with anyio.CancelScope() as scope:
            self._command_scopes.add(scope)
            if ahead:
                self._ahead_scopes.add(scope)
            try:
                if previous is not None:
                    await previous.wait()
                if self._abandoned:
                    pass
                elif ahead:
                    await self._build_early(argv, scope)
                elif not await self._hand_over(argv):
                    await self._command(argv)
            except SandboxError as exc:
                await self.reporter.error(exc.code, str(exc))
            finally:
                self._command_scopes.discard(scope)
                self._ahead_scopes.discard(scope)
                done.set()

    async def _command(self, argv: list[str]) -> None:
        await self.wait_installs()
        await self.flushed()
        await self.reporter.record("command_start", {"argv": argv})
        try:
            result = await self.ports.run_command(argv, self.reporter.output)
        except CommandRefused as exc:
            await self.reporter.error("command_refused", str(exc))
            return
        record = {"argv": argv, "exit_code": result.exit_code}
        self.changed()
        if result.ok:
            self._succeeded(argv)
        else:
            self.log.workspace_state += 1  # the command may have changed files too
        self.log.commands.append(record)
        await self.reporter.record("command", record)
        if not result.ok:
            await self.reporter.error(failure_code(result, "command_failed"), failure_text(result))

    async def _build_early(self, argv: list[str], scope: anyio.CancelScope) -> None:
        """The build ahead: silent, kept only if nothing but a request for it came meanwhile."""
        start = self._changes
        if self._built_ahead is not None and self._built_ahead.changes == start:
            return
        await self.wait_installs()
        await self.flushed()
        if self._changes != start:
            return  # more came meanwhile: the answer's next sandbox_end builds again
        lines: list[str] = []

        async def keep(line: str) -> None:
            lines.append(line)

        self._ahead_scope = scope
        try:
            result, header = await self._run_ahead(argv, keep)
        except SandboxError:
            return  # silent: the build the answer asks for runs (and reports) as a command
        finally:
            self._ahead_scope = None
        if result.ok and self._changes == start:
            self._built_ahead = BuiltAhead(tuple(argv), start, header + lines)
            self._succeeded(argv)

    async def _run_ahead(self, argv: list[str], keep: OutputSink) -> tuple[ExecResult, list[str]]:
        """Run the build ahead for ``argv``; its result and the lines npm would print first.

        When package.json still says the template's build, that runs without npm in front: by
        the template's resident builder where there is one, else as a new process."""
        try:
            manifest = await self._read_file("package.json")
        except SandboxError:
            manifest = None
        direct = direct_build(self.template, manifest)
        if direct is None:
            return await self.ports.run_command(argv, keep), []
        program, header = direct
        if self.template.builder and self.ports.run_builder is not None:
            return await self.ports.run_builder(self.template, False, keep), header
        return await self.ports.run_command(program, keep), header

    async def _hand_over(self, argv: list[str]) -> bool:
        """Report the build ahead as this command's run when it built exactly these files."""
        ahead = self._built_ahead
        if ahead is None or ahead.argv != tuple(argv) or ahead.changes != self._changes:
            return False
        await self.reporter.record("command_start", {"argv": argv})
        for line in ahead.lines:
            await self.reporter.output(line)
        record = {"argv": argv, "exit_code": 0}
        self.log.commands.append(record)
        self._succeeded(argv)
        await self.reporter.record("command", record)
        return True

    def _succeeded(self, argv: Sequence[str]) -> None:
        self.log.workspace_state += 1  # like any command: it may have changed files
        self.log.succeeded_in[tuple(argv)] = self.log.workspace_state
