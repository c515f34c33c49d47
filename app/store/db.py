"""What every database under the store does: errors, transactions, versioned migrations.

:class:`Database` is the one interface the repository code (users, chats, runs, run events)
uses; :mod:`app.store.sqlite_db` (the embedded default, a file in the data dir) and
:mod:`app.store.postgres_db` (``KILN_DATABASE_URL``, a multi-host deployment) implement it.
Statements are written once, in SQLite's portable SQL; each database's
:class:`~app.store.dialects.Dialect` says how to speak them.
:func:`app.store.backends.open_database` picks the implementation.

- **Transactions** are explicit and nest: an inner :meth:`Database.transaction` on the same
  thread joins the outer one, which lets callers combine repository methods into one atomic step.
  Reads on a thread inside a transaction see its writes.
- **Writers of one run's events are serialized** (:meth:`Database.lock_row`): SQLite's write
  lock (``BEGIN IMMEDIATE``) does it for every writer; Postgres locks the run's row.
- **Migrations** are numbered SQL scripts applied in order at open, each in its own transaction
  together with its row in ``schema_version`` (and under a lock, so two processes opening a new
  database at once apply each script once); opening an up-to-date database changes nothing.
- **Errors** of the driver become :class:`StoreError` at this boundary: a unique or foreign-key
  refusal :class:`StoreConflict`, a full disk :class:`StoreFull`, on either database.
"""

from __future__ import annotations

import abc
import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

from app.errors import KilnError
from app.store.dialects import Dialect

SCHEMA_VERSION_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied REAL NOT NULL)"
)


class StoreError(KilnError):
    """The database failed (locked for too long, disk full, a corrupt file, unreachable)."""

    code = "store_error"


class StoreConflict(StoreError):
    """A write contradicts what is stored (a duplicate name, an unknown owner)."""

    code = "conflict"


class StoreFull(StoreError):
    """The disk under the database is full."""

    code = "disk_full"


Row = Mapping[str, Any]


class Cursor(Protocol):
    """What a statement returns: its rows and how many rows it changed."""

    @property
    def rowcount(self) -> int:
        """Rows changed by the statement."""

    def fetchone(self) -> Any:
        """The next row (a mapping by column name), or None."""

    def fetchall(self) -> list[Any]:
        """The remaining rows."""


class Connection(Protocol):
    """A connection inside a transaction, speaking the store's (SQLite-style) SQL."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor:
        """Run one statement with ``?`` parameters."""

    def executemany(self, sql: str, parameters: Sequence[Sequence[Any]], /) -> Cursor:
        """Run one statement once per parameter row."""


class Database(abc.ABC):
    """A database with nested per-thread transactions and migrations applied at open."""

    dialect: Dialect

    @property
    @abc.abstractmethod
    def location(self) -> str:
        """Where the database is, for messages (a file, or a URL without its password)."""

    @property
    @abc.abstractmethod
    def connection_count(self) -> int:
        """Connections open now."""

    @abc.abstractmethod
    def transaction(self) -> contextlib.AbstractContextManager[Connection]:
        """A write transaction on this thread; joins an enclosing one."""

    @abc.abstractmethod
    def query(self, sql: str, parameters: Sequence[Any] = ()) -> list[Row]:
        """Rows of a read-only statement."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close every connection; the object must not be used afterwards."""

    @abc.abstractmethod
    def server_version(self) -> str:
        """The database software and its version (for ``kiln doctor``)."""

    def query_one(self, sql: str, parameters: Sequence[Any] = ()) -> Row | None:
        """The first row of a read-only statement, or None."""
        rows = self.query(sql, parameters)
        return rows[0] if rows else None

    def lock_row(self, db: Connection, table: str, key: str) -> None:
        """Inside a transaction: hold ``table``'s row ``key`` until it ends, so writers that
        derive numbers from it (a run's next event seq) take turns."""
        if self.dialect.row_lock is not None:
            db.execute(self.dialect.row_lock.format(table=table), (key,))

    def schema_version(self) -> int:
        """The number of migrations applied."""
        row = self.query_one("SELECT MAX(version) AS version FROM schema_version")
        return int(row["version"] or 0) if row else 0

    def migrate(self, migrations: Sequence[str]) -> None:
        """Apply the migrations this database has not seen yet, each atomically."""
        with self._migration() as db:
            db.execute(self.dialect.migration(SCHEMA_VERSION_TABLE))
        for version, script in enumerate(migrations, start=1):
            with self._migration() as db:
                # Re-checked inside the lock: another process may have just applied it.
                done = db.execute(
                    "SELECT 1 FROM schema_version WHERE version = ?", (version,)
                ).fetchone()
                if done:
                    continue
                for statement in statements(script):
                    db.execute(self.dialect.migration(statement))
                db.execute(
                    "INSERT INTO schema_version (version, applied) VALUES (?, ?)",
                    (version, time.time()),
                )

    @contextlib.contextmanager
    def _migration(self) -> Iterator[Connection]:
        """A transaction holding the migration lock."""
        with self.transaction() as db:
            if self.dialect.migration_lock is not None:
                db.execute(self.dialect.migration_lock)
            yield db


def statements(script: str) -> list[str]:
    """The statements of a migration script (split on ``;``: none may contain one)."""
    return [part.strip() for part in script.split(";") if part.strip()]
