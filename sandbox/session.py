"""Drive one sandbox from parser events, exactly as a run does.

``file_*`` events go to the write buffer (:mod:`sandbox.writes.file_events`), ``install_content`` is
queued on the install queue and runs in the background while files keep streaming, ``command``
is queued too: commands run one at a time in the order they came, each once no install is
pending and every file before it is flushed, while the stream goes on (the answer never stalls
behind a build); :meth:`SandboxSession.wait_commands` waits for them. With ``build_ahead``, the
template's build (:data:`BUILD_COMMAND`) is queued silently as soon as an answer's files are
complete (``sandbox_end``): post-generation builds every run anyway, so starting it then costs
nothing, and when the answer asks for the same build on the same files its result is handed
over (output replayed) instead of building again. A file, edit, install or command after it
cancels it (its processes are killed) and the build runs again when asked.
:meth:`SandboxSession.settle` waits only for what can change the project's source files, not for
the build (it writes only its output, which no version of a project holds): a turn's version is
taken while its build runs. Nothing raises out of
:meth:`SandboxSession.handle`: a refused or failed step becomes an error record (``code`` +
``message``) and the stream goes on, because the model gets the errors back and the user sees
them.

The session only talks to the outside world through :class:`SandboxPorts` (five callables), so
the agent loop, ``kiln sandbox apply`` and the tests can wire it to the manager or to fakes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType

import anyio
from anyio.abc import TaskGroup

from parser.events import (
    Command,
    EditBlock,
    EditEnd,
    EditStart,
    Error,
    Event,
    FileContent,
    FileEnd,
    FileStart,
    InstallContent,
    SandboxEnd,
)
from sandbox.errors import CommandRefused, SandboxError
from sandbox.execution.exec_stream import ExecResult, OutputSink
from sandbox.execution.install_queue import InstallResult
from sandbox.images.templates import BUILD_COMMAND, Template, direct_build
from sandbox.lifecycle.manager import SandboxManager
from sandbox.nested_exits import NestedExits
from sandbox.session_log import (
    DISK_QUOTA_EXCEEDED,
    QUOTA_ADVICE,
    BuiltAhead,
    FailedEdit,
    Record,
    RecordSink,
    SessionLog,
    failure_code,
    failure_text,
)
from sandbox.writes.edit_blocks import EDIT_NO_MATCH, apply_edit_blocks
from sandbox.writes.file_events import FileEventWriter, WorkspaceReader, WriteNotice
from sandbox.writes.flush import ContainerResolver, FailedWrite, Flusher, FlushScheduler
from sandbox.writes.write_buffer import WriteBuffer


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


def manager_ports(manager: SandboxManager, sandbox_id: str) -> SandboxPorts:
    """The ports of ``sandbox_id`` served by the sandbox manager."""

    async def install(specs: Sequence[str], on_output: OutputSink | None) -> InstallResult:
        return await manager.install(sandbox_id, specs, on_output)

    async def run_command(argv: Sequence[str], on_output: OutputSink | None) -> ExecResult:
        return await manager.run_command(sandbox_id, argv, on_output)

    async def read_workspace(path: str) -> str | None:
        return await manager.read_file(sandbox_id, path)

    async def run_builder(
        template: Template, warm: bool, on_output: OutputSink | None
    ) -> ExecResult:
        return await manager.run_builder(sandbox_id, template, warm=warm, on_output=on_output)

    return SandboxPorts(
        resolve=manager.container_for,
        install=install,
        wait_install_idle=manager.install_queue(sandbox_id).wait_idle,
        run_command=run_command,
        read_workspace=read_workspace,
        run_builder=run_builder,
    )


async def _ignore(kind: str, record: Record) -> None:
    """The default record sink."""


class SandboxSession:
    """One sandbox driven by a stream of parser events; use as an async context manager."""

    def __init__(
        self,
        buffer: WriteBuffer,
        template: Template,
        ports: SandboxPorts,
        *,
        debounce: float,
        max_wait: float,
        on_record: RecordSink = _ignore,
        build_ahead: bool = False,
    ) -> None:
        """Write through ``buffer``, run through ``ports``, report through ``on_record``;
        ``build_ahead``: start the template's build once an answer's files are complete."""
        self.buffer = buffer
        self.template = template
        self.ports = ports
        self.log = SessionLog()
        self._on_record = on_record
        self.scheduler = FlushScheduler(
            Flusher(buffer, ports.resolve),
            debounce,
            max_wait,
            on_failed=self._write_failed,
            before_flush=lambda: self.writer.push(),
        )
        self.writer = FileEventWriter(buffer, self.scheduler, template, ports.read_workspace)
        self._edits: dict[str, list[tuple[str, str]]] = {}
        self._written: set[str] = set()  # paths this session wrote (the buffer has them)
        self._installs_pending = 0
        self._installs_idle = anyio.Event()
        self._installs_idle.set()
        self._stack = NestedExits()
        self._tasks: TaskGroup | None = None
        # One scope per running install: abandon() cancels these, never the task group's own
        # scope, which also holds the task that abandons (it would be cancelled mid-close).
        self._install_scopes: set[anyio.CancelScope] = set()
        self._command_scopes: set[anyio.CancelScope] = set()
        self._last_command: anyio.Event | None = None  # set when the latest queued one is done
        # ... and the latest the answer (or post-generation) asked for: a turn waits for that
        # one, not for a build ahead after it, which goes on into the next turn if need be.
        self._last_asked: anyio.Event | None = None
        self._last_changing: anyio.Event | None = None  # ... and the latest that is no build
        self._ahead_scopes: set[anyio.CancelScope] = set()  # builds ahead queued or running
        self._abandoned = False
        self._build_ahead = build_ahead
        self._ahead_scope: anyio.CancelScope | None = None  # the build ahead, while it runs
        self._built_ahead: BuiltAhead | None = None
        self._changes = 0  # what may have changed files, a request for the build aside
        self._installed = 0  # installs done: each may change what the resident builder loads
        self._warmed_for = -1  # ... and how many were done when it was last asked to warm up

    async def __aenter__(self) -> SandboxSession:
        await self._stack.enter_async_context(self.scheduler)
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

    async def handle(self, event: Event) -> None:
        """Act on one parser event; failures become error records, never exceptions."""
        try:
            await self._dispatch(event)
        except SandboxError as exc:
            await self._error(exc.code, str(exc))

    async def wait_commands(self) -> None:
        """Wait until every command handed over so far has run (or was refused)."""
        if self._last_asked is not None:
            await self._last_asked.wait()

    async def finish(self) -> SessionLog:
        """Wait for pending commands, installs and the last flush; drop config files never
        finished."""
        await self.writer.abandon()
        await self.wait_commands()
        await self._wait_installs()
        await self._flushed()
        return self.log

    async def settle(self) -> SessionLog:
        """Wait until what was handed over can no longer change the project's source files:
        installs, flushes and every command but the template's build done (the build may go on;
        see the module docstring)."""
        await self.writer.abandon()
        if self._last_changing is not None:
            await self._last_changing.wait()  # commands run in order: the earlier ones are done
        await self._wait_installs()
        await self._flushed()
        return self.log

    async def abandon(self) -> SessionLog:
        """A cancelled run: stop background installs and commands, flush the files the answer
        ended, and leave the one it was still writing as it was (never half of it); a
        ``rollback`` record says what was kept and what was rolled back."""
        self._abandoned = True
        for scope in (*self._install_scopes, *self._command_scopes):
            scope.cancel()
        self._edits.clear()  # blocks of an edit that never ended are never applied
        try:
            self.log.rolled_back = await self.writer.roll_back()
        except SandboxError as exc:
            await self._error(exc.code, str(exc))
        await self._flushed()
        kept = [path for path in self.log.files if path not in self.log.rolled_back]
        await self._on_record("rollback", {"kept": kept, "rolled_back": self.log.rolled_back})
        return self.log

    async def _dispatch(self, event: Event) -> None:
        if isinstance(
            event, FileStart | FileContent | FileEnd | InstallContent | Command | EditEnd
        ):
            self.log.workspace_state += 1
            if not _asks_for_build(event):
                self._changed()
                self.log.source_state += 1
        if isinstance(event, EditStart | EditBlock | EditEnd):
            if isinstance(event, EditStart):
                self._warm_builder()
            await self._edit(event)
        elif isinstance(event, FileContent):
            await self.writer.append(event.path, event.content)
        elif isinstance(event, FileStart):
            self._written.add(event.path)
            self._warm_builder()
            await self.writer.start(event.path)
        elif isinstance(event, FileEnd):
            await self._file_end(event.path)
        elif isinstance(event, SandboxEnd):
            await self._flushed()
            if self._build_ahead:
                self._queue_command(list(BUILD_COMMAND), ahead=True)
        elif isinstance(event, InstallContent):
            self._queue_install(event.dependencies)
        elif isinstance(event, Command):
            self._queue_command([event.command, *event.args])
        elif isinstance(event, Error):
            await self._error(event.code, event.message, event.severity)

    async def read_file(self, path: str) -> str | None:
        """``path`` as this run left it: the write buffer's content if the run wrote it (it
        may not be flushed yet), else the sandbox's file (``None`` if there is none). The
        buffer may also hold an earlier run's content, which a restored version replaced."""
        if path in self._written:
            buffered = await self.writer.read(path)
            if buffered is not None:
                return buffered.decode(errors="replace")
        return await self.ports.read_workspace(path)

    async def _edit(self, event: EditStart | EditBlock | EditEnd) -> None:
        """Blocks are collected per file and applied, all or none, when its edit ends."""
        if isinstance(event, EditStart):
            self._edits[event.path] = []
        elif isinstance(event, EditBlock):
            self._edits.setdefault(event.path, []).append((event.search, event.replace))
        else:
            blocks = self._edits.pop(event.path, [])
            if blocks:
                await self._apply_edit(event.path, blocks)

    async def _apply_edit(self, path: str, blocks: list[tuple[str, str]]) -> None:
        """Apply the blocks to the current content; the new content goes through the write
        buffer as a whole file, like any file (the write path stays idempotent)."""
        current = await self.read_file(path)
        if current is None:
            message = f"{path!r} does not exist, so it cannot be edited; write it whole with <file>"
            await self._refuse_edit(FailedEdit(path, EDIT_NO_MATCH, message, None))
            return
        result = apply_edit_blocks(path, current, blocks)
        if result.content is None:
            await self._refuse_edit(FailedEdit(path, result.code, result.message, current))
            return
        self._written.add(path)
        await self.writer.start(path)
        await self.writer.append(path, result.content)
        await self._file_end(path)
        if path in self.writer.completed:  # not a template config file it refused
            self.log.applied_edits.append((path, result.content))
            await self._on_record("edit", {"path": path, "blocks": len(blocks)})

    async def _refuse_edit(self, failed: FailedEdit) -> None:
        self.log.failed_edits.append(failed)
        await self._error(failed.code, failed.message, path=failed.path)

    async def _file_end(self, path: str) -> None:
        notices = await self.writer.end(path)
        if path in self.writer.completed and path not in self.log.files:
            self.log.files.append(path)
            await self._on_record("file", {"path": path})
        for notice in notices:
            await self._notice(notice)

    async def _notice(self, notice: WriteNotice) -> None:
        record = {"code": notice.code, "path": notice.path, "message": notice.message}
        self.log.warnings.append(record)
        await self._on_record("warning", record)
        if notice.packages:
            self._queue_install(notice.packages)

    def _queue_install(self, packages: Sequence[str]) -> None:
        if self._tasks is None:
            raise RuntimeError("enter the session (`async with`) before handling events")
        if not packages:
            return
        if self._installs_pending == 0:
            self._installs_idle = anyio.Event()
        self._installs_pending += 1
        self._tasks.start_soon(self._install, tuple(packages))

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
            await self._on_record("install_start", {"packages": list(packages)})
            result = await self.ports.install(packages, self._output)
            record = {"packages": list(result.packages), "exit_code": result.result.exit_code}
            if result.already_installed:
                record["already_installed"] = True
            self.log.installs.append(record)
            await self._on_record("install", record)
            if not result.ok:
                await self._error(
                    failure_code(result.result, "install_failed"), failure_text(result.result)
                )
        except SandboxError as exc:
            await self._error(exc.code, str(exc))
        finally:
            self._installs_pending -= 1
            self._installed += 1
            if self._installs_pending == 0:
                self._installs_idle.set()
                self._warm_builder()

    def _warm_builder(self) -> None:
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

    async def _warm_now(self, run_builder: Callable[..., Awaitable[ExecResult]]) -> None:
        with contextlib.suppress(SandboxError):  # only speed is lost: builds work without it
            await run_builder(self.template, True, None)

    def _queue_command(self, argv: list[str], *, ahead: bool = False) -> None:
        if self._tasks is None:
            raise RuntimeError("enter the session (`async with`) before handling events")
        previous, self._last_command = self._last_command, anyio.Event()
        if not ahead:
            self._last_asked = self._last_command
        if tuple(argv) != BUILD_COMMAND:
            self._last_changing = self._last_command
        self._tasks.start_soon(self._command_in_turn, argv, previous, self._last_command, ahead)

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
                await self._error(exc.code, str(exc))
            finally:
                self._command_scopes.discard(scope)
                self._ahead_scopes.discard(scope)
                done.set()

    async def _command(self, argv: list[str]) -> None:
        await self._wait_installs()
        await self._flushed()
        await self._on_record("command_start", {"argv": argv})
        try:
            result = await self.ports.run_command(argv, self._output)
        except CommandRefused as exc:
            await self._error("command_refused", str(exc))
            return
        record = {"argv": argv, "exit_code": result.exit_code}
        self._changed()
        if result.ok:
            self._succeeded(argv)
        else:
            self.log.workspace_state += 1  # the command may have changed files too
        self.log.commands.append(record)
        await self._on_record("command", record)
        if not result.ok:
            await self._error(failure_code(result, "command_failed"), failure_text(result))

    def _changed(self) -> None:
        self._changes += 1
        if self._ahead_scope is not None:
            self._ahead_scope.cancel()  # it builds files that are changing

    async def _build_early(self, argv: list[str], scope: anyio.CancelScope) -> None:
        """The build ahead: silent, kept only if nothing but a request for it came meanwhile."""
        start = self._changes
        if self._built_ahead is not None and self._built_ahead.changes == start:
            return
        await self._wait_installs()
        await self._flushed()
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
            manifest = await self.ports.read_workspace("package.json")
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
        await self._on_record("command_start", {"argv": argv})
        for line in ahead.lines:
            await self._output(line)
        record = {"argv": argv, "exit_code": 0}
        self.log.commands.append(record)
        self._succeeded(argv)
        await self._on_record("command", record)
        return True

    def _succeeded(self, argv: Sequence[str]) -> None:
        self.log.workspace_state += 1  # like any command: it may have changed files
        self.log.succeeded_in[tuple(argv)] = self.log.workspace_state

    async def _wait_installs(self) -> None:
        while self._installs_pending:
            await self._installs_idle.wait()
        await self.ports.wait_install_idle()

    async def _flushed(self) -> None:
        try:
            await self.scheduler.wait_flushed()
        except SandboxError as exc:
            await self._error(exc.code, str(exc))

    async def _write_failed(self, failed: FailedWrite) -> None:
        if failed.path in self.log.files:
            self.log.files.remove(failed.path)
        if failed.code == DISK_QUOTA_EXCEEDED:
            message = f"{failed.path!r} could not be written: {QUOTA_ADVICE}"
        else:
            message = f"{failed.path!r} could not be written: {failed.reason}"
        await self._error(failed.code, message)

    async def _output(self, line: str) -> None:
        await self._on_record("output", {"line": line})

    async def _error(
        self, code: str, message: str, severity: str = "recoverable", *, path: str = ""
    ) -> None:
        record = {"code": code, "message": message, "severity": severity}
        if path:
            record["path"] = path
        self.log.errors.append(record)
        await self._on_record("error", record)


def _asks_for_build(event: Event) -> bool:
    """A ``command`` event for the template's build (it will take the build ahead's result)."""
    return isinstance(event, Command) and (event.command, *event.args) == BUILD_COMMAND
