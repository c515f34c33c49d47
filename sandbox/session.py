"""Drive one sandbox from parser events, exactly as a run does.

:meth:`SandboxSession.handle` sends each event where it belongs:

- ``file_*`` to the write buffer (:mod:`sandbox.writes.file_events`), flushed into the container
  by the flush scheduler (:mod:`sandbox.writes.flush`);
- ``edit_*`` to the edit path (:mod:`sandbox.session_edits`), whose new content is written like
  any file;
- ``install_content`` and ``command`` to the command line (:mod:`sandbox.session_commands`):
  installs and commands run in the background, commands one at a time in the order they came,
  while the stream goes on (the answer never stalls behind a build);
  :meth:`SandboxSession.wait_commands` waits for them. With ``build_ahead`` the template's build
  starts as soon as an answer's files are complete (``sandbox_end``) and is handed over when the
  answer asks for it.

:meth:`SandboxSession.settle` waits only for what can change the project's source files, not for
the build (it writes only its output, which no version of a project holds): a turn's version is
taken while its build runs. Nothing raises out of :meth:`SandboxSession.handle`: a refused or
failed step becomes an error record (``code`` + ``message``) and the stream goes on, because the
model gets the errors back and the user sees them.

The session only talks to the outside world through :class:`SandboxPorts`, so the agent loop,
``kiln sandbox apply`` and the tests can wire it to the manager or to fakes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType

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
from sandbox.errors import SandboxError
from sandbox.execution.exec_stream import ExecResult, OutputSink
from sandbox.execution.install_queue import InstallResult
from sandbox.images.templates import BUILD_COMMAND, Template
from sandbox.lifecycle.manager import SandboxManager
from sandbox.nested_exits import NestedExits
from sandbox.session_commands import CommandLine, SandboxPorts
from sandbox.session_edits import EditPath
from sandbox.session_log import (
    DISK_QUOTA_EXCEEDED,
    QUOTA_ADVICE,
    AppliedEdit,
    FailedEdit,
    RecordSink,
    SessionLog,
    SessionReporter,
)
from sandbox.writes.file_events import FileEventWriter, WriteNotice
from sandbox.writes.flush import FailedWrite, Flusher, FlushScheduler
from sandbox.writes.write_buffer import WriteBuffer

__all__ = ["SandboxPorts", "SandboxSession", "manager_ports"]


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
        on_record: RecordSink | None = None,
        build_ahead: bool = False,
    ) -> None:
        """Write through ``buffer``, run through ``ports``, report through ``on_record``;
        ``build_ahead``: start the template's build once an answer's files are complete."""
        self.buffer = buffer
        self.template = template
        self.ports = ports
        self.reporter = SessionReporter(on_record)
        self.log: SessionLog = self.reporter.log
        flusher = Flusher(buffer, ports.resolve)
        self.scheduler = FlushScheduler(
            flusher, debounce, max_wait, on_failed=self._write_failed, before_flush=self._push
        )
        self.writer = FileEventWriter(buffer, self.scheduler, template, ports.read_workspace)
        self.commands = CommandLine(
            ports,
            template,
            self.reporter,
            self.scheduler,
            build_ahead=build_ahead,
            read_file=self.read_file,
        )
        self.edits = EditPath(self.reporter)
        self._written: set[str] = set()  # paths this session wrote (the buffer has them)
        # Whether only this session's writes changed the project's files (no install, no
        # command but the template's build, no failed write, no rollback): see written_files.
        self._only_writes = True
        self._base: Mapping[str, bytes] = {}  # the project's files as it opened (start_from)
        self._stack = NestedExits()

    async def __aenter__(self) -> SandboxSession:
        await self._stack.enter_async_context(self.scheduler)
        await self._stack.enter_async_context(self.commands)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._stack.__aexit__(exc_type, exc, traceback)

    async def handle(self, event: Event) -> None:
        """Act on one parser event; failures become error records, never exceptions."""
        try:
            await self._dispatch(event)
        except SandboxError as exc:
            await self.reporter.error(exc.code, str(exc))

    async def end_edit(self, event: EditEnd) -> AppliedEdit | FailedEdit | None:
        """:meth:`handle` for an ``edit_end``, with what came of the edit (``None``: it had no
        blocks, or its file was not written)."""
        try:
            self._count_change(event)
            return await self._edit_end(event)
        except SandboxError as exc:
            await self.reporter.error(exc.code, str(exc))
            return None

    async def wait_commands(self) -> None:
        """Wait until every command handed over so far has run (or was refused)."""
        await self.commands.wait_asked()

    async def finish(self) -> SessionLog:
        """Wait for pending commands, installs and the last flush; drop config files never
        finished."""
        await self.writer.abandon()
        await self.commands.wait_asked()
        await self.commands.wait_installs()
        await self.commands.flushed()
        return self.log

    async def settle(self) -> SessionLog:
        """Wait until what was handed over can no longer change the project's source files:
        installs, flushes and every command but the template's build done (the build may go on;
        see the module docstring). A config file never ended is dropped: the stream is over."""
        await self.writer.abandon()
        return await self.quiet()

    async def quiet(self) -> SessionLog:
        """:meth:`settle` while the stream may go on: what was handed over so far is in, and
        nothing queued can still change the source files; a file being written stays open."""
        await self.commands.wait_changing()
        await self.commands.wait_installs()
        await self.commands.flushed()
        return self.log

    async def abandon(self) -> SessionLog:
        """A cancelled run: stop background installs and commands, flush the files the answer
        ended, and leave the one it was still writing as it was (never half of it); a
        ``rollback`` record says what was kept and what was rolled back."""
        self._only_writes = False
        self.commands.abandon()
        self.edits.abandon()
        ended = set(self.writer.completed)
        try:
            self.log.rolled_back = await self.writer.roll_back()
        except SandboxError as exc:
            await self.reporter.error(exc.code, str(exc))
        for path in self.writer.completed:
            if path not in ended:  # its end was cut after Redis took it: a whole file
                await self._listed(path)
        await self.commands.flushed()
        kept = [path for path in self.log.files if path not in self.log.rolled_back]
        await self.reporter.record("rollback", {"kept": kept, "rolled_back": self.log.rolled_back})
        return self.log

    def start_from(self, files: Mapping[str, bytes]) -> None:
        """The sandbox's project files as the session opens, when kiln knows them (the version
        the sandbox is in step with): :meth:`read_file` serves them without an exec into the
        sandbox (the edit's base, the build's ``package.json``) while only this session's
        writes changed files."""
        self._base = files

    async def written_files(self) -> dict[str, bytes] | None:
        """The files this session wrote whole, as the sandbox holds them (call after
        :meth:`settle`), if nothing else can have changed the project's files since it opened
        (an install or a command may rewrite any of them; a failed write leaves the sandbox's
        file as it was); ``None`` otherwise. A version can then be recorded from them without
        reading the workspace (:meth:`app.projects.sync.ProjectSync.record`)."""
        if not self._only_writes or self.writer.has_open_files:
            return None
        files: dict[str, bytes] = {}
        for path in self.log.files:
            content = await self.writer.read(path)
            if content is None:
                return None
            files[path] = content
        return files

    async def read_file(self, path: str) -> str | None:
        """``path`` as this run left it: the write buffer's content if the run wrote it (it
        may not be flushed yet), else the sandbox's file (``None`` if there is none). The
        buffer may also hold an earlier run's content, which a restored version replaced."""
        if path in self._written:
            buffered = await self.writer.read(path)
            if buffered is not None:
                return buffered.decode(errors="replace")
        known = self._base.get(path) if self._only_writes else None
        if known is not None:
            return known.decode(errors="replace")
        return await self.ports.read_workspace(path)

    async def _dispatch(self, event: Event) -> None:
        self._count_change(event)
        if isinstance(event, FileContent):  # the hot path: one chunk of a file
            await self.writer.append(event.path, event.content)
        elif isinstance(event, FileStart):
            self._written.add(event.path)
            self.commands.warm_builder()
            await self.writer.start(event.path)
        elif isinstance(event, FileEnd):
            await self._file_end(event.path)
        elif isinstance(event, EditStart | EditBlock):
            if isinstance(event, EditStart):
                self.commands.warm_builder()
            self.edits.collect(event)
        elif isinstance(event, EditEnd):
            await self._edit_end(event)
        elif isinstance(event, SandboxEnd):
            await self.commands.flushed()
            self.commands.queue_build_ahead()
        elif isinstance(event, InstallContent):
            self._only_writes = False
            self.commands.queue_install(event.dependencies)
        elif isinstance(event, Command):
            self._only_writes = self._only_writes and _asks_for_build(event)
            self.commands.queue([event.command, *event.args])
        elif isinstance(event, Error):
            await self.reporter.error(event.code, event.message, event.severity)

    def _count_change(self, event: Event) -> None:
        """Count what may change the workspace (and, but for a request for the template's
        build, the project's source files: a build ahead of them is then void)."""
        if isinstance(
            event, FileStart | FileContent | FileEnd | InstallContent | Command | EditEnd
        ):
            self.log.workspace_state += 1
            if not _asks_for_build(event):
                self.commands.changed()
                self.log.source_state += 1

    async def _edit_end(self, event: EditEnd) -> AppliedEdit | FailedEdit | None:
        blocks = self.edits.end(event)
        if not blocks:
            return None
        path = event.path
        outcome = await self.edits.apply(path, blocks, await self.read_file(path))
        if isinstance(outcome, FailedEdit):
            return outcome
        self._written.add(path)
        await self.writer.start(path)
        await self.writer.append(path, outcome.content)
        await self._file_end(path)
        if path not in self.writer.completed:  # a template config file it refused
            return None
        await self.edits.applied(outcome, blocks)
        return outcome

    async def _file_end(self, path: str) -> None:
        notices = await self.writer.end(path)
        if path in self.writer.completed:
            await self._listed(path)
        for notice in notices:
            await self._notice(notice)

    async def _listed(self, path: str) -> None:
        """A file written whole: in the log's files, and told, once."""
        if path not in self.log.files:
            self.log.files.append(path)
            await self.reporter.record("file", {"path": path})

    async def _notice(self, notice: WriteNotice) -> None:
        record = {"code": notice.code, "path": notice.path, "message": notice.message}
        self.log.warnings.append(record)
        await self.reporter.record("warning", record)
        if notice.packages:
            self._only_writes = False
            self.commands.queue_install(notice.packages)

    async def _push(self) -> None:
        """Before each flush: the chunks the writer gathered go into the buffer."""
        await self.writer.push()

    async def _write_failed(self, failed: FailedWrite) -> None:
        self._only_writes = False
        if failed.path in self.log.files:
            self.log.files.remove(failed.path)
        if failed.code == DISK_QUOTA_EXCEEDED:
            message = f"{failed.path!r} could not be written: {QUOTA_ADVICE}"
        else:
            message = f"{failed.path!r} could not be written: {failed.reason}"
        await self.reporter.error(failed.code, message)


def _asks_for_build(event: Event) -> bool:
    """A ``command`` event for the template's build (it will take the build ahead's result)."""
    return isinstance(event, Command) and (event.command, *event.args) == BUILD_COMMAND
