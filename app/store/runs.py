"""Runs: created queued, claimed by one worker, finished exactly once.

Every status change is a conditional ``UPDATE`` (``WHERE status = ...``), so concurrent workers,
the cancel endpoint and the stale-run reaper can race freely: exactly one of them wins, and the
loser learns it from the return value. :meth:`RunTables.finish_run` stores the assistant's reply
in the same transaction, so a reply is never written twice nor without its run ending.
"""

from __future__ import annotations

import json
import time
from typing import Any

from app.store.chats import insert_message
from app.store.db import Connection, Database
from app.store.models import (
    ACTIVE_STATUSES,
    QUEUED,
    RUNNING,
    TERMINAL_STATUSES,
    Run,
    new_id,
    run_from_row,
)

_UPDATABLE = frozenset(
    {"provider", "model", "template", "stop_reason", "turns", "usage", "sandbox_id"}
    | {"preview_url", "error", "cancel_requested"}
)
_INSERTED = (
    *("id", "chat_id", "user_id", "message_id", "provider", "model", "template"),
    *("status", "created"),
)
_ACTIVE = "status IN ('queued', 'running')"


class RunTables:
    """The ``runs`` table."""

    _db: Database

    def create_run(
        self,
        chat_id: str,
        user_id: str,
        message_id: str | None,
        provider: str | None,
        model: str | None,
        *,
        template: str | None = None,
        run_id: str | None = None,
    ) -> Run:
        """A new ``queued`` run; ``run_id`` lets admission reserve the id before it exists."""
        run = Run(
            id=run_id or new_id(),
            chat_id=chat_id,
            user_id=user_id,
            message_id=message_id,
            provider=provider,
            model=model,
            template=template,
            status=QUEUED,
            stop_reason=None,
            turns=0,
            created=time.time(),
        )
        with self._db.transaction() as db:
            columns = _INSERTED
            db.execute(
                f"INSERT INTO runs ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                [getattr(run, column) for column in columns],
            )
        return run

    def get_run(self, run_id: str) -> Run | None:
        """The run with this id, or None."""
        row = self._db.query_one("SELECT * FROM runs WHERE id = ?", (run_id,))
        return run_from_row(row) if row else None

    def list_runs(self, chat_id: str) -> list[Run]:
        """The chat's runs, oldest first."""
        rows = self._db.query(
            "SELECT * FROM runs WHERE chat_id = ? ORDER BY created, rowid", (chat_id,)
        )
        return [run_from_row(row) for row in rows]

    def update_run(self, run_id: str, **fields: Any) -> Run | None:
        """Set some of a run's fields (not its status: see claim/finish); the updated run."""
        unknown = set(fields) - _UPDATABLE
        if unknown:
            raise ValueError(f"run fields that update_run cannot set: {sorted(unknown)!r}")
        if fields:
            values = [_column_value(key, value) for key, value in fields.items()]
            assignments = ", ".join(f"{key} = ?" for key in fields)
            with self._db.transaction() as db:
                db.execute(f"UPDATE runs SET {assignments} WHERE id = ?", (*values, run_id))
        return self.get_run(run_id)

    def claim_run(self, run_id: str, worker: str | None = None, *, takeover: bool = False) -> bool:
        """Mark a queued run ``running`` for ``worker``; whether this call claimed it.

        ``takeover`` also claims a ``running`` run: a worker that reclaimed the queue entry of
        a dead one takes the run over (the dead worker's later writes are refused by
        :meth:`finish_run`'s worker check).
        """
        statuses = ACTIVE_STATUSES if takeover else (QUEUED,)
        marks = ", ".join("?" for _ in statuses)
        with self._db.transaction() as db:
            cursor = db.execute(
                "UPDATE runs SET status = ?, worker = ?, attempts = attempts + 1,"
                f" started = COALESCE(started, ?) WHERE id = ? AND status IN ({marks})",
                (RUNNING, worker, time.time(), run_id, *statuses),
            )
            return cursor.rowcount == 1

    def finish_run(
        self,
        run_id: str,
        status: str,
        stop_reason: str | None,
        *,
        worker: str | None = None,
        from_statuses: tuple[str, ...] = ACTIVE_STATUSES,
        reply: tuple[str, dict[str, Any]] | None = None,
        **fields: Any,
    ) -> bool:
        """End a run with a terminal ``status``; whether this call ended it.

        Only a run in ``from_statuses`` (queued or running) is ended; with ``worker``, only
        while that worker holds it. ``reply`` (text, data) is stored as the chat's assistant
        message in the same transaction. ``fields`` are those of :meth:`update_run` (turns,
        usage, error, sandbox_id, preview_url...).
        """
        if status not in TERMINAL_STATUSES:
            raise ValueError(f"a run ends completed, failed or cancelled, got {status!r}")
        unknown = set(fields) - _UPDATABLE
        if unknown:
            raise ValueError(f"run fields that finish_run cannot set: {sorted(unknown)!r}")
        assignments = "".join(f", {key} = ?" for key in fields)
        values = [_column_value(key, value) for key, value in fields.items()]
        condition = f"status IN ({', '.join('?' for _ in from_statuses)})"
        where: list[Any] = [run_id, *from_statuses]
        if worker is not None:
            condition, where = condition + " AND worker = ?", [*where, worker]
        with self._db.transaction() as db:
            cursor = db.execute(
                f"UPDATE runs SET status = ?, stop_reason = ?, finished = ?{assignments}"
                f" WHERE id = ? AND {condition}",
                (status, stop_reason, time.time(), *values, *where),
            )
            if cursor.rowcount != 1:
                return False
            if reply is not None:
                _store_reply(db, run_id, *reply)
        return True

    def request_cancel(self, run_id: str) -> Run | None:
        """Mark an active run ``cancel_requested``; the run as it now is (None if unknown)."""
        with self._db.transaction() as db:
            db.execute(
                f"UPDATE runs SET cancel_requested = 1 WHERE id = ? AND {_ACTIVE}", (run_id,)
            )
        return self.get_run(run_id)

    def active_runs(self, user_id: str | None = None, chat_id: str | None = None) -> list[Run]:
        """Queued and running runs, optionally of one user and/or one chat, oldest first."""
        sql, parameters = f"SELECT * FROM runs WHERE {_ACTIVE}", list[str]()
        if user_id is not None:
            sql, parameters = sql + " AND user_id = ?", [*parameters, user_id]
        if chat_id is not None:
            sql, parameters = sql + " AND chat_id = ?", [*parameters, chat_id]
        rows = self._db.query(sql + " ORDER BY created, rowid", parameters)
        return [run_from_row(row) for row in rows]


def _column_value(key: str, value: Any) -> Any:
    """A field's value as its column stores it."""
    if key == "usage":
        return json.dumps(value or {})
    if key == "cancel_requested":
        return int(bool(value))
    return value


def _store_reply(db: Connection, run_id: str, content: str, data: dict[str, Any]) -> None:
    """The assistant's message for the run, inside the caller's transaction."""
    row = db.execute("SELECT chat_id FROM runs WHERE id = ?", (run_id,)).fetchone()
    message = insert_message(db, row["chat_id"], "assistant", content, data)
    db.execute("UPDATE runs SET reply_id = ? WHERE id = ?", (message.id, run_id))
