"""A run's events (numbered 1, 2, ... per run) and its latest checkpoint.

Events arrive in batches (see :mod:`app.runs.events`): one :meth:`RunEventTables.append_events`
call is one transaction, whatever the batch size. The sequence numbers are assigned while the
transaction holds the run's row (SQLite's write lock, Postgres' row lock: see
:meth:`app.store.db.Database.lock_row`), so two writers of one run, even in two processes on two
hosts, take turns: never the same number, never a gap.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from app.store.db import Database

DEFAULT_PAGE = 1000


class RunEventTables:
    """The ``run_events`` and ``checkpoints`` tables."""

    _db: Database

    def append_events(self, run_id: str, events: Sequence[dict[str, Any]]) -> list[int]:
        """Store ``events`` (each a dict with a ``type``) after the run's last; their seqs."""
        if not events:
            return []
        now = time.time()
        with self._db.transaction() as db:
            self._db.lock_row(db, "runs", run_id)
            row = db.execute(
                "SELECT COALESCE(MAX(seq), 0) AS last FROM run_events WHERE run_id = ?", (run_id,)
            ).fetchone()
            first = int(row["last"]) + 1
            seqs = list(range(first, first + len(events)))
            db.executemany(
                "INSERT INTO run_events (run_id, seq, type, data, created) VALUES (?, ?, ?, ?, ?)",
                [
                    (run_id, seq, str(event["type"]), json.dumps(event), now)
                    for seq, event in zip(seqs, events, strict=True)
                ],
            )
        return seqs

    def events_after(
        self, run_id: str, seq: int = 0, limit: int = DEFAULT_PAGE
    ) -> list[tuple[int, dict[str, Any]]]:
        """Up to ``limit`` events of the run with a seq above ``seq``, in order."""
        rows = self._db.query(
            "SELECT seq, data FROM run_events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (run_id, seq, limit),
        )
        return [(int(row["seq"]), json.loads(row["data"])) for row in rows]

    def events_of_type(self, run_id: str, kind: str) -> list[tuple[int, dict[str, Any]]]:
        """The run's events of one ``type``, in order."""
        rows = self._db.query(
            "SELECT seq, data FROM run_events WHERE run_id = ? AND type = ? ORDER BY seq",
            (run_id, kind),
        )
        return [(int(row["seq"]), json.loads(row["data"])) for row in rows]

    def last_seq(self, run_id: str) -> int:
        """The seq of the run's last event (0 when it has none)."""
        row = self._db.query_one(
            "SELECT COALESCE(MAX(seq), 0) AS last FROM run_events WHERE run_id = ?", (run_id,)
        )
        return int(row["last"]) if row else 0

    def save_checkpoint(self, run_id: str, data: dict[str, Any]) -> None:
        """Replace the run's checkpoint."""
        with self._db.transaction() as db:
            db.execute(
                "INSERT INTO checkpoints (run_id, data, updated) VALUES (?, ?, ?)"
                " ON CONFLICT (run_id) DO UPDATE SET data = excluded.data,"
                " updated = excluded.updated",
                (run_id, json.dumps(data), time.time()),
            )

    def load_checkpoint(self, run_id: str) -> dict[str, Any] | None:
        """The run's latest checkpoint, or None."""
        row = self._db.query_one("SELECT data FROM checkpoints WHERE run_id = ?", (run_id,))
        if row is None:
            return None
        data: dict[str, Any] = json.loads(row["data"])
        return data
