"""Publishing as a background job, one per chat at a time, within a per-user hourly limit.

:meth:`PublishJobs.submit` checks the version, then the store, in one transaction, the user's
limit (``KILN_PUBLISH_PER_HOUR``: the jobs the user started in the last hour, failed ones too;
:class:`~app.publish.errors.PublishRateLimited`) and the chat's running job (a second is
refused: :class:`~app.publish.errors.PublishBusy`), writes the job's row and starts
:meth:`Publisher.publish <app.publish.publisher.Publisher.publish>` in :meth:`PublishJobs.run`'s
task group; the request answers at once. The job's row moves through :data:`STAGES`::

    queued -> building -> storing -> live
                    \\---------\\----> failed (code and words; the link serves what it served)

Any host reads the row (a reload, another tab, a request on another host):
:meth:`PublishJobs.follow` yields it each time it changes, woken in this process by the job
itself and reading the store every :data:`FOLLOW_POLL_SECONDS` for a job another host runs.

A job ends within the build's limit plus :data:`JOB_MARGIN_SECONDS` (provisioning, storing), or
fails as a timeout; a server stopping ends its jobs as ``publish_interrupted``. A row still
running :data:`STALE_MARGIN_SECONDS` past that (its process died) is ended in the same words the
next time anyone reads or submits for the chat: a dead job never blocks a chat for good.

:meth:`PublishJobs.run` also collects the stored builds no link serves, every
``KILN_PUBLISH_GC_INTERVAL`` (:meth:`Publisher.collect <app.publish.publisher.Publisher.collect>`).
"""

from __future__ import annotations

import functools
import logging
import math
import secrets
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol, TypeVar

import anyio
import anyio.abc
import anyio.to_thread

from app.projects.errors import ProjectError
from app.projects.store import VersionRef
from app.publish.errors import (
    PublishBusy,
    PublishError,
    PublishInterrupted,
    PublishRateLimited,
    PublishTimeout,
)
from app.publish.publisher import BUILDING, STORING, Publisher
from app.store.publish_jobs import PublishJob, StartWindow

log = logging.getLogger(__name__)
T = TypeVar("T")

QUEUED, LIVE, FAILED = "queued", "live", "failed"
STAGES = (QUEUED, BUILDING, STORING, LIVE, FAILED)
HOUR_SECONDS = 3600.0
JOB_MARGIN_SECONDS = 300.0  # on top of the build's limit: provisioning and storing
STALE_MARGIN_SECONDS = 300.0  # on top of a job's own limit: nothing runs it any more
FOLLOW_POLL_SECONDS = 1.0
INTERRUPTED = "the server publishing version {version} stopped before it ended; publish again"
UNEXPECTED = "publishing failed unexpectedly; the server log has job {job!r}"


class JobRows(Protocol):
    """What jobs need of the store (:class:`app.store.publish_jobs.PublishJobTables`)."""

    def start_publish_job(
        self,
        job_id: str,
        chat_id: str,
        user_id: str,
        version: int,
        stage: str,
        window: StartWindow | None = None,
    ) -> PublishJob | list[float] | None:
        """A new running job; None when the chat has one; the user's starts in ``window``
        when they are its most."""
        ...

    def publish_job(self, job_id: str) -> PublishJob | None:
        """The job, or None."""
        ...

    def latest_publish_job(self, chat_id: str) -> PublishJob | None:
        """The chat's newest job, or None."""
        ...

    def set_publish_stage(self, job_id: str, stage: str) -> None:
        """Move a running job on."""
        ...

    def end_publish_job(
        self, job_id: str, stage: str, code: str | None = None, message: str | None = None
    ) -> None:
        """End a running job."""
        ...

    def end_stale_publish_jobs(
        self, chat_id: str, updated_before: float, stage: str, code: str, message: str
    ) -> int:
        """End the chat's job that has not moved since ``updated_before``."""
        ...


class PublishJobs:
    """The background publishes of this process (module docstring)."""

    def __init__(self, publisher: Publisher, rows: JobRows) -> None:
        """Run ``publisher``'s publishes as jobs kept in ``rows``; :meth:`run` must run."""
        self.publisher, self.rows = publisher, rows
        settings = publisher.settings
        self.job_seconds = settings.build_seconds + JOB_MARGIN_SECONDS
        self.stale_seconds = self.job_seconds + STALE_MARGIN_SECONDS
        self._tasks: anyio.abc.TaskGroup | None = None
        self._changed: dict[str, anyio.Event] = {}  # per chat: wakes its followers

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Run the submitted jobs and collect stored builds every interval, until cancelled
        (a stopping server: its jobs end as interrupted)."""
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            task_status.started()
            try:
                while True:
                    await anyio.sleep(self.publisher.settings.gc_interval_seconds)
                    await self.publisher.collect()
            finally:
                self._tasks = None

    async def submit(self, chat: str, ref: VersionRef, *, owner: str) -> PublishJob:
        """Start publishing version ``ref`` of ``chat`` for user ``owner``; the queued job."""
        tasks = self._tasks
        if tasks is None:
            raise PublishError("this server is not running publish jobs now; try again shortly")
        version = await _in_thread(self.publisher.projects.version, chat, ref)
        await self._end_stale(chat)
        job_id, now, limit = secrets.token_hex(8), time.time(), self.publisher.settings.per_hour
        window = StartWindow(now - HOUR_SECONDS, limit)
        job = await _in_thread(
            self.rows.start_publish_job, job_id, chat, owner, version.number, QUEUED, window
        )
        if isinstance(job, list):
            raise _rate_limited(job, limit, now)
        if job is None:
            running = await _in_thread(self.rows.latest_publish_job, chat)
            which = f"version {running.version}" if running else "a version"
            raise PublishBusy(
                f"chat {chat!r} is publishing {which} already: wait until it is live or failed"
            )
        tasks.start_soon(self._run, job)
        return job

    async def latest(self, chat: str) -> PublishJob | None:
        """The chat's newest job (a dead one ended first), or None."""
        await self._end_stale(chat)
        return await _in_thread(self.rows.latest_publish_job, chat)

    async def follow(self, chat: str, job_id: str) -> AsyncIterator[PublishJob]:
        """The job each time it changes, until it has ended (yielded once ended)."""
        last: PublishJob | None = None
        while True:
            changed = self._changed.setdefault(chat, anyio.Event())  # before the read
            await self._end_stale(chat)
            job = await _in_thread(self.rows.publish_job, job_id)
            if job is None or job.chat_id != chat:
                return
            if job != last:
                yield job
                last = job
            if not job.active:
                return
            with anyio.move_on_after(FOLLOW_POLL_SECONDS):
                await changed.wait()

    async def _run(self, job: PublishJob) -> None:
        """Publish the job's version; its row ends live or failed in words, whatever happens."""
        ended: tuple[str, str | None, str | None] = (
            FAILED,
            PublishInterrupted.code,
            INTERRUPTED.format(version=job.version),
        )
        try:
            with anyio.move_on_after(self.job_seconds) as limit:
                await self.publisher.publish(
                    job.chat_id,
                    job.version,
                    owner=job.user_id,
                    on_stage=functools.partial(self._stage, job),
                )
                ended = (LIVE, None, None)
            if limit.cancelled_caught:
                words = f"publishing took longer than {self.job_seconds:g} seconds"
                ended = (FAILED, PublishTimeout.code, words)
        except (PublishError, ProjectError) as exc:
            ended = (FAILED, exc.code, str(exc))
        except Exception:
            log.exception("publish job %r of chat %r failed", job.id, job.chat_id)
            ended = (FAILED, PublishError.code, UNEXPECTED.format(job=job.id))
        finally:
            with anyio.CancelScope(shield=True):
                await self._end(job, *ended)

    async def _stage(self, job: PublishJob, stage: str) -> None:
        await _in_thread(self.rows.set_publish_stage, job.id, stage)
        self._wake(job.chat_id)

    async def _end(self, job: PublishJob, stage: str, code: str | None, words: str | None) -> None:
        try:
            await _in_thread(self.rows.end_publish_job, job.id, stage, code, words)
        except Exception:  # the row is ended as stale later: never lose the task group for it
            log.exception("publish job %r could not be ended as %r", job.id, stage)
        self._wake(job.chat_id)

    async def _end_stale(self, chat: str) -> None:
        """End the chat's job if no process runs it any more (module docstring)."""
        before = time.time() - self.stale_seconds
        latest = await _in_thread(self.rows.latest_publish_job, chat)
        if latest is None or not latest.active or latest.updated >= before:
            return
        words = INTERRUPTED.format(version=latest.version)
        code = PublishInterrupted.code
        await _in_thread(self.rows.end_stale_publish_jobs, chat, before, FAILED, code, words)

    def _wake(self, chat: str) -> None:
        changed = self._changed.pop(chat, None)
        if changed is not None:
            changed.set()


def _duration(seconds: int) -> str:
    """``seconds`` in words: "42 seconds", "12 minutes"."""
    if seconds < 120:
        return f"{seconds} seconds"
    return f"{math.ceil(seconds / 60)} minutes"


async def _in_thread(fn: Callable[..., T], *args: Any) -> T:
    return await anyio.to_thread.run_sync(functools.partial(fn, *args))


def _rate_limited(started: list[float], limit: int, now: float) -> PublishRateLimited:
    """The refusal of a user who started ``started`` (oldest first) in the last hour."""
    # Once the oldest of the newest ``limit`` leaves the hour, one more fits.
    retry_after = max(1, math.ceil(started[-limit] + HOUR_SECONDS - now))
    return PublishRateLimited(
        f"{len(started)} publishes started in the last hour and at most {limit} may "
        f"(KILN_PUBLISH_PER_HOUR); the next may start in {_duration(retry_after)}",
        retry_after,
    )
