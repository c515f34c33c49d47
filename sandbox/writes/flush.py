"""Flushing the write buffer into a sandbox: one tar per flush, under the sandbox's Redis lock.

:class:`Flusher` does one flush: take the lock, read every dirty file, write them all with ONE
``put_archive`` into ``/workspace``, clear the marks of what was written. The tar carries whole
files, so a flush is idempotent and can be replayed; when the resolver hands back a different
container than the last flush used (the old one died), every file of the run is written again.
One bad file never sinks the others: when Docker refuses an archive (a name the filesystem
cannot hold, say), the files are written one by one and only the refused ones are reported
(:attr:`FlushReport.failed`); a lost container or engine is not a bad file and is retried.

:class:`FlushScheduler` decides when: after ``debounce`` seconds without writes, but never later
than ``max_wait`` after the first unflushed write, so steady streaming cannot postpone a flush
forever; :meth:`FlushScheduler.request_now` (``file_end``) and :meth:`FlushScheduler.wait_flushed`
(before a command) skip the wait. One flush runs at a time; requests made meanwhile coalesce.
A failed flush is retried after a delay that doubles up to :data:`RETRY_MAX_SECONDS`, so an
outage (Redis restarting, Docker away) never turns the scheduler into a busy loop.
"""

from __future__ import annotations

import contextlib
import io
import posixpath
import tarfile
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol

import anyio
import redis.exceptions
from redis.asyncio.lock import Lock

from sandbox.docker_boundary import call
from sandbox.errors import (
    DiskQuotaExceeded,
    SandboxError,
    SandboxLost,
    SandboxNotFound,
    SandboxUnavailable,
    WriteFailed,
)
from sandbox.images.templates import SANDBOX_UID, WORKSPACE
from sandbox.nested_exits import NestedExits
from sandbox.writes.write_buffer import BufferedFile, WriteBuffer, redis_errors

FILE_MODE = 0o644
DIR_MODE = 0o755
RETRY_FIRST_SECONDS = 0.25
RETRY_MAX_SECONDS = 5.0
# The flush lock lives this long unless its holder renews it (every third of it while it
# flushes): a holder that died (its process killed, its host gone) blocks the sandbox's next
# flush, another host's takeover of the run, only this long (it was 120 s, a whole takeover).
LOCK_SECONDS = 10.0
# The container or the engine is gone: another container may take the files, so not a bad file.
_GONE = (SandboxNotFound, SandboxUnavailable)


class ArchiveTarget(Protocol):
    """What a flush needs of a container (a docker-py ``Container`` is one)."""

    @property
    def id(self) -> str:
        """The container's id."""

    def put_archive(self, path: str, data: bytes) -> bool:
        """Extract the tar ``data`` at ``path`` inside the container."""


# Returns a running container for a sandbox id, provisioning a fresh one if the old one died.
ContainerResolver = Callable[[str], Awaitable[ArchiveTarget]]


def build_workspace_tar(files: Iterable[tuple[str, bytes]], mtime: float | None = None) -> bytes:
    """A tar of ``(relative path, content)`` pairs with their parent folders, owned by uid 1000.

    Files get mode 0644 and folders 0755, so the sandbox user can edit what the model wrote.
    Raises :class:`WriteFailed` for a path that is absolute or escapes the workspace.
    """
    stamp = time.time() if mtime is None else mtime
    out = io.BytesIO()
    folders: set[str] = set()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, content in files:
            _check_relative(path)
            for folder in _ancestors(path):
                if folder not in folders:
                    folders.add(folder)
                    tar.addfile(_entry(folder, tarfile.DIRTYPE, DIR_MODE, stamp))
            info = _entry(path, tarfile.REGTYPE, FILE_MODE, stamp)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return out.getvalue()


def _check_relative(path: str) -> None:
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise WriteFailed(f"refusing to write a path outside the workspace: {path!r}")


def _ancestors(path: str) -> list[str]:
    """``a/b/c.js`` -> ``["a", "a/b"]``, outermost first."""
    parents = []
    folder = posixpath.dirname(path)
    while folder:
        parents.append(folder)
        folder = posixpath.dirname(folder)
    return parents[::-1]


def _entry(name: str, kind: bytes, mode: int, mtime: float) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.uid = info.gid = SANDBOX_UID
    info.mtime = int(mtime)
    return info


@dataclass(frozen=True, slots=True)
class FailedWrite:
    """A file Docker refused to write, why, and the error's code (``write_failed``, or
    ``disk_quota_exceeded`` when the sandbox's quota stopped it)."""

    path: str
    reason: str
    code: str = WriteFailed.code


@dataclass(frozen=True, slots=True)
class FlushReport:
    """What one flush wrote: the paths, into which container, whether it was a replay, and the
    files that could not be written (not retried: the same content would be refused again)."""

    paths: tuple[str, ...]
    container_id: str
    replayed: bool
    failed: tuple[FailedWrite, ...] = ()


class Flusher:
    """Performs flushes of one sandbox's write buffer; safe to run from many processes at once."""

    def __init__(
        self,
        buffer: WriteBuffer,
        resolve: ContainerResolver,
        *,
        lock_timeout: float = LOCK_SECONDS,
        lock_wait: float = 300.0,
    ) -> None:
        """Flush ``buffer`` into the container ``resolve(sandbox_id)`` returns."""
        self.buffer = buffer
        self._resolve = resolve
        self._lock_timeout = lock_timeout
        self._lock_wait = lock_wait
        self.archives_written = 0  # put_archive calls, for benchmarks and tests

    async def flush(self) -> FlushReport:
        """Write every dirty file (every file, into a new container) in one tar, under the lock."""
        lock = self.buffer.lock(self._lock_timeout, self._lock_wait)
        sandbox_id = self.buffer.sandbox_id
        with redis_errors(f"taking the flush lock of sandbox {sandbox_id!r}"):
            acquired = await lock.acquire()
        if not acquired:
            raise WriteFailed(f"timed out waiting for the flush lock of sandbox {sandbox_id!r}")
        try:
            return await self._flush_renewing(lock)
        finally:
            # A lock that expired under us only means another flusher may have overlapped; both
            # wrote whole files, so nothing is lost and the expiry is not worth failing over.
            releasing = f"releasing the flush lock of sandbox {sandbox_id!r}"
            with redis_errors(releasing), contextlib.suppress(redis.exceptions.LockError):
                await lock.release()

    async def _flush_renewing(self, lock: Lock) -> FlushReport:
        """:meth:`_flush_locked` while the lock is renewed; its error raised as it is (not in
        the task group's exception group)."""
        failure: Exception | None = None
        async with anyio.create_task_group() as renewing:
            renewing.start_soon(self._renew, lock)
            try:
                report = await self._flush_locked()
            except Exception as exc:
                failure = exc
            renewing.cancel_scope.cancel()
        if failure is not None:
            raise failure
        return report

    async def _renew(self, lock: Lock) -> None:
        """Keep the held lock alive while a flush runs (its timeout counts from each renewal)."""
        while True:
            await anyio.sleep(self._lock_timeout / 3)
            # Expired already (the loop was stalled): the flush goes on, as below.
            with contextlib.suppress(redis.exceptions.LockError, redis.exceptions.RedisError):
                await lock.reacquire()

    async def _flush_locked(self) -> FlushReport:
        try:
            return await self._attempt()
        except (WriteFailed, SandboxLost):
            raise
        except SandboxError:
            # The container died or vanished between resolving and writing: resolve again (the
            # resolver provisions a fresh one) and replay; a second failure is reported. A
            # sandbox lost with its cluster node is said as that (the run ends on it).
            try:
                return await self._attempt()
            except SandboxLost:
                raise
            except SandboxError as exc:
                sandbox_id = self.buffer.sandbox_id
                raise WriteFailed(f"cannot write the files of sandbox {sandbox_id!r}") from exc

    async def _attempt(self) -> FlushReport:
        container = await self._resolve(self.buffer.sandbox_id)
        replay = container.id != await self.buffer.last_container()
        files = await (self.buffer.all_files() if replay else self.buffer.dirty_files())
        failed = await self._put(container, files) if files else ()
        if files or replay:
            await self.buffer.clear_flushed(files, container.id)
        refused = {f.path for f in failed}
        written = tuple(f.path for f in files if f.path not in refused)
        return FlushReport(written, container.id, replay, failed)

    async def _put(
        self, container: ArchiveTarget, files: Sequence[BufferedFile]
    ) -> tuple[FailedWrite, ...]:
        """Write ``files`` in one archive; if Docker refuses it, one by one (see module doc)."""
        try:
            await self._put_archive(container, files)
            return ()
        except _GONE:
            raise
        except SandboxError as exc:
            if len(files) == 1:
                return (FailedWrite(files[0].path, str(exc), _failed_code(exc)),)
        failed = []
        for file in files:
            try:
                await self._put_archive(container, [file])
            except _GONE:
                raise
            except SandboxError as exc:
                failed.append(FailedWrite(file.path, str(exc), _failed_code(exc)))
        return tuple(failed)

    async def _put_archive(self, container: ArchiveTarget, files: Sequence[BufferedFile]) -> None:
        archive = build_workspace_tar((f.target, f.content) for f in files)
        self.archives_written += 1
        if not await call(container.put_archive, WORKSPACE, archive):
            paths = [f.path for f in files]
            raise WriteFailed(f"docker refused the archive for {paths[:5]!r} in {container.id!r}")


def _failed_code(exc: SandboxError) -> str:
    """A refused file's code: the quota's own, else ``write_failed``."""
    return exc.code if isinstance(exc, DiskQuotaExceeded) else WriteFailed.code


class FlushScheduler:
    """Debounced, max-wait-bounded flushing of one sandbox, run as a background task.

    Use as ``async with FlushScheduler(flusher, debounce, max_wait) as scheduler:``; call
    :meth:`note_write` after every buffered write.
    """

    def __init__(
        self,
        flusher: Flusher,
        debounce: float,
        max_wait: float,
        on_failed: Callable[[FailedWrite], Awaitable[None]] | None = None,
        before_flush: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Flush through ``flusher`` ``debounce`` s after writes stop, at most ``max_wait`` late;
        ``on_failed`` hears of every file that could not be written; ``before_flush`` runs
        first (it moves gathered chunks into the buffer)."""
        self.flusher = flusher
        self._on_failed = on_failed
        self._before_flush = before_flush
        self._retry_at = 0.0  # no flush before this (after failures)
        self._failures = 0  # failed flushes in a row
        self._debounce = debounce
        self._max_wait = max_wait
        self._written = 0  # writes noted so far
        self._started = 0  # writes covered by the flush running now (or the last one)
        self._flushed = 0  # writes covered by a flush that succeeded
        self._first_pending = 0.0
        self._last_write = 0.0
        self._urgent = False
        self._wake = anyio.Event()
        self._progress = anyio.Event()
        self.last_error: SandboxError | None = None
        self.reports: list[FlushReport] = []
        self._stack = NestedExits()

    async def __aenter__(self) -> FlushScheduler:
        task_group = await self._stack.enter_async_context(anyio.create_task_group())
        self._stack.callback(task_group.cancel_scope.cancel)
        task_group.start_soon(self._run)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._stack.__aexit__(exc_type, exc, traceback)

    def note_write(self) -> None:
        """Record that a write reached the buffer; a flush will follow."""
        now = anyio.current_time()
        if self._written == self._started:
            self._first_pending = now
        self._written += 1
        self._last_write = now
        self._wake.set()

    def request_now(self) -> None:
        """Flush pending writes without waiting for the debounce (``file_end``)."""
        self._urgent = True
        self._wake.set()

    async def wait_flushed(self) -> None:
        """Return once every write noted so far is in the container; raise the flush's error."""
        target = self._written
        while self._flushed < target:
            self.request_now()
            progress = self._progress
            await progress.wait()
            if self._flushed < target and self.last_error is not None:
                raise self.last_error

    async def _run(self) -> None:
        while True:
            await self._until_pending()
            await self._until_due()
            await self._flush_once()

    async def _until_pending(self) -> None:
        while self._written == self._started:
            self._urgent = False  # a request with nothing to flush is already satisfied
            await self._sleep_until_woken(None)

    async def _until_due(self) -> None:
        while True:
            due = min(self._last_write + self._debounce, self._first_pending + self._max_wait)
            due = max(self._retry_at, anyio.current_time() if self._urgent else due)
            delay = due - anyio.current_time()
            if delay <= 0:
                return
            await self._sleep_until_woken(delay)

    async def _sleep_until_woken(self, delay: float | None) -> None:
        # Flags, not the event, carry the state, so replacing the event never loses a wake-up.
        with anyio.move_on_after(delay):
            await self._wake.wait()
        self._wake = anyio.Event()

    async def _flush_once(self) -> None:
        target, self._started, self._urgent = self._written, self._written, False
        try:
            if self._before_flush is not None:
                await self._before_flush()
            report = await self.flusher.flush()
        except SandboxError as exc:
            self.last_error = exc
            self._started = self._flushed  # still pending: retried after a growing delay
            self._first_pending = anyio.current_time()
            self._failures += 1
            delay = RETRY_FIRST_SECONDS * 2 ** (self._failures - 1)
            self._retry_at = anyio.current_time() + min(delay, RETRY_MAX_SECONDS)
        else:
            self.reports.append(report)
            self.last_error, self._failures, self._retry_at = None, 0, 0.0
            self._flushed = target
            if self._on_failed is not None:
                for failed in report.failed:
                    await self._on_failed(failed)
        progress, self._progress = self._progress, anyio.Event()
        progress.set()
