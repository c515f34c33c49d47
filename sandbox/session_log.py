"""What a sandbox session did, as JSON-ready records: the log a run reads back (its files,
installs, commands, errors, the workspace's state for reusing a build) and the words for a
failed install or command."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sandbox.errors import DiskFull, DiskQuotaExceeded
from sandbox.execution.exec_stream import ExecResult

Record = dict[str, Any]
RecordSink = Callable[[str, Record], Awaitable[None]]  # (kind, record) for progress display


@dataclass(frozen=True, slots=True)
class AppliedEdit:
    """An edit applied: the file's whole new content."""

    path: str
    content: str


@dataclass(frozen=True, slots=True)
class FailedEdit:
    """An edit refused as a whole: why, and the file's content it was tried on."""

    path: str
    code: str  # edit_no_match | edit_ambiguous
    message: str
    content: str | None  # None: the file does not exist


@dataclass
class SessionLog:
    """Everything a session did, in order, as JSON-ready records."""

    files: list[str] = field(default_factory=list)
    installs: list[Record] = field(default_factory=list)
    commands: list[Record] = field(default_factory=list)
    errors: list[Record] = field(default_factory=list)
    warnings: list[Record] = field(default_factory=list)
    # The workspace's state, as a count of what may have changed it (file events, installs,
    # commands), and the state each command last succeeded in: a caller can tell that a build
    # already passed on exactly the files there are now, and skip building them again.
    workspace_state: int = 0
    succeeded_in: dict[tuple[str, ...], int] = field(default_factory=dict)
    # The same count of what may have changed the project's source files: the template's build
    # is left out (it writes only its output, which no version holds), so a version recorded
    # after a build is known to be the current one.
    source_state: int = 0
    # Edits in the order they ended: each applied one as (path, whole new content), and each
    # refused one; the agent loop tells the model about the latter.
    applied_edits: list[tuple[str, str]] = field(default_factory=list)
    failed_edits: list[FailedEdit] = field(default_factory=list)
    # A cancelled session's files started and never ended: each stays at its place as it was
    # before (absent if it was new); ``files`` are the ones kept whole.
    rolled_back: list[str] = field(default_factory=list)

    def succeeded_on_current_files(self, argv: Sequence[str]) -> bool:
        """Whether ``argv`` last exited 0 with the workspace as it is now."""
        return self.succeeded_in.get(tuple(argv)) == self.workspace_state


async def _ignore(kind: str, record: Record) -> None:
    """The default record sink."""


class SessionReporter:
    """The one way a session's parts report: each record goes into the log where it belongs
    and out through ``on_record`` (the run's events)."""

    def __init__(self, on_record: RecordSink | None = None) -> None:
        """Keep a fresh :class:`SessionLog`; tell ``on_record`` (if any) of every record."""
        self.log = SessionLog()
        self._on_record = on_record or _ignore

    async def record(self, kind: str, record: Record) -> None:
        """Tell the sink of a record the caller already logged (or that is not logged)."""
        await self._on_record(kind, record)

    async def output(self, line: str) -> None:
        """One line of an install's or command's output."""
        await self._on_record("output", {"line": line})

    async def error(
        self, code: str, message: str, severity: str = "recoverable", *, path: str = ""
    ) -> None:
        """An error record: logged and told (the stream goes on)."""
        record = {"code": code, "message": message, "severity": severity}
        if path:
            record["path"] = path
        self.log.errors.append(record)
        await self._on_record("error", record)


@dataclass(frozen=True, slots=True)
class BuiltAhead:
    """A build ahead that passed: its command, the changes it saw, its output lines."""

    argv: tuple[str, ...]
    changes: int
    lines: list[str]


OUT_OF_MEMORY = "out_of_memory"
DISK_QUOTA_EXCEEDED = DiskQuotaExceeded.code
DISK_FULL = DiskFull.code
# What the user and the model read when a sandbox's disk quota stops a command or a write.
QUOTA_ADVICE = (
    "the sandbox's disk quota is used up (delete files it does not need, such as build "
    "output or large generated data, or write less)"
)


def failure_code(result: ExecResult, failed: str) -> str:
    """The error code of a failed install or command: ``out_of_memory``,
    ``disk_quota_exceeded``, ``disk_full`` or ``failed``."""
    if result.oom_killed:
        return OUT_OF_MEMORY
    if result.over_quota:
        return DISK_QUOTA_EXCEEDED
    return DISK_FULL if result.disk_full else failed


def failure_text(result: ExecResult) -> str:
    """A human message for a command that failed, with the tail of its output."""
    if result.oom_killed:
        how = "ran out of memory: the sandbox's memory limit killed it"
    elif result.over_quota:
        how = f"ran out of disk space: {QUOTA_ADVICE}"
    elif result.disk_full:
        how = "ran out of disk space: the server's disk is full"
    elif result.timed_out:
        how = "timed out"
    else:
        how = f"exited with {result.exit_code}"
    tail = "\n".join(result.output.splitlines()[-20:])
    return f"{' '.join(result.argv)!r} {how}" + (f":\n{tail}" if tail else "")
