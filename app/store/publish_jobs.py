"""Publish jobs: a publish running in the background, and how it ended (app/publish/jobs.py).

A job's row is written by the process that runs it and read by any host (its progress survives a
reload, a closed tab and a request landing on another host). ``active`` holds the chat's id
while the job runs and is UNIQUE: a second publish of the chat cannot start until the first
ended (its row's ``active`` set to NULL with its last stage). A job whose process died keeps
``active`` until :meth:`PublishJobTables.end_stale_publish_jobs` ends it in words.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.store.db import Database, StoreConflict


@dataclass(frozen=True)
class PublishJob:
    """One publish of a chat's version: where it is (``stage``) and, once failed, why."""

    id: str
    chat_id: str
    user_id: str
    version: int
    stage: str
    active: bool
    code: str | None
    message: str | None
    created: float
    updated: float

    def to_dict(self) -> dict[str, Any]:
        """The API's form."""
        return {
            "id": self.id,
            "chat_id": self.chat_id,
            "version": self.version,
            "stage": self.stage,
            "active": self.active,
            "code": self.code,
            "message": self.message,
            "created": self.created,
            "updated": self.updated,
        }


def publish_job_from_row(row: Mapping[str, Any]) -> PublishJob:
    """A :class:`PublishJob` of a ``publish_jobs`` row."""
    return PublishJob(
        row["id"],
        row["chat_id"],
        row["user_id"],
        int(row["version"]),
        row["stage"],
        row["active"] is not None,
        row["code"],
        row["message"],
        float(row["created"]),
        float(row["updated"]),
    )


@dataclass(frozen=True)
class StartWindow:
    """At most ``most`` jobs of one user may have started since ``since`` (a time)."""

    since: float
    most: int


class PublishJobTables:
    """The ``publish_jobs`` table."""

    _db: Database

    def start_publish_job(
        self,
        job_id: str,
        chat_id: str,
        user_id: str,
        version: int,
        stage: str,
        window: StartWindow | None = None,
    ) -> PublishJob | list[float] | None:
        """A new running job at ``stage``; None when the chat has a running one already; with
        a ``window``, when the user's jobs started in it (oldest first) if they are its
        ``most`` already. The count and the insert are one transaction under the user's row
        lock, so two requests at once cannot both take the window's last start."""
        now = time.time()
        try:
            with self._db.transaction() as db:
                if window is not None:
                    self._db.lock_row(db, "users", user_id)
                    started = self.publish_jobs_started_since(user_id, window.since)
                    if len(started) >= window.most:
                        return started
                db.execute(
                    "INSERT INTO publish_jobs (id, chat_id, user_id, version, stage, active,"
                    " created, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (job_id, chat_id, user_id, version, stage, chat_id, now, now),
                )
        except StoreConflict:
            return None
        return self.publish_job(job_id)

    def publish_job(self, job_id: str) -> PublishJob | None:
        """The job ``job_id``, or None."""
        row = self._db.query_one("SELECT * FROM publish_jobs WHERE id = ?", (job_id,))
        return publish_job_from_row(row) if row else None

    def latest_publish_job(self, chat_id: str) -> PublishJob | None:
        """The chat's newest job (running or ended), or None."""
        row = self._db.query_one(
            "SELECT * FROM publish_jobs WHERE chat_id = ? ORDER BY created DESC LIMIT 1",
            (chat_id,),
        )
        return publish_job_from_row(row) if row else None

    def set_publish_stage(self, job_id: str, stage: str) -> None:
        """Move a running job to ``stage``."""
        with self._db.transaction() as db:
            db.execute(
                "UPDATE publish_jobs SET stage = ?, updated = ?"
                " WHERE id = ? AND active IS NOT NULL",
                (stage, time.time(), job_id),
            )

    def end_publish_job(
        self, job_id: str, stage: str, code: str | None = None, message: str | None = None
    ) -> None:
        """End a running job at ``stage`` (with a failure's code and words); the chat may
        publish again."""
        with self._db.transaction() as db:
            db.execute(
                "UPDATE publish_jobs SET stage = ?, code = ?, message = ?, active = NULL,"
                " updated = ? WHERE id = ? AND active IS NOT NULL",
                (stage, code, message, time.time(), job_id),
            )

    def end_stale_publish_jobs(
        self, chat_id: str, updated_before: float, stage: str, code: str, message: str
    ) -> int:
        """End the chat's running job if it has not moved since ``updated_before`` (its process
        died); how many were ended."""
        with self._db.transaction() as db:
            cursor = db.execute(
                "UPDATE publish_jobs SET stage = ?, code = ?, message = ?, active = NULL,"
                " updated = ? WHERE chat_id = ? AND active IS NOT NULL AND updated < ?",
                (stage, code, message, time.time(), chat_id, updated_before),
            )
            return int(cursor.rowcount)

    def publish_jobs_started_since(self, user_id: str, since: float) -> list[float]:
        """When the user's jobs started at or after ``since`` began, oldest first (the publish
        rate limit counts them)."""
        rows = self._db.query(
            "SELECT created FROM publish_jobs WHERE user_id = ? AND created >= ? ORDER BY created",
            (user_id, since),
        )
        return [float(row["created"]) for row in rows]
