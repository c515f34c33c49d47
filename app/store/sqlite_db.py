"""The embedded store: a SQLite file in the data dir (the default; ``make demo`` needs no server).

- **One connection per thread** (``sqlite3`` connections must not be shared between threads):
  the async code calls the store through ``anyio.to_thread.run_sync``, and each worker thread
  opens its own connection the first time it needs one. :meth:`SQLiteDatabase.close` closes
  them all.
- **WAL mode** lets readers (SSE replays, ``GET`` requests) run while a writer commits;
  ``busy_timeout`` makes a second writer wait instead of failing; foreign keys are enforced.
- **Transactions** start ``BEGIN IMMEDIATE``: the write lock is taken at the start, so two
  writers never deadlock upgrading a read lock, and every writer (of any process) takes turns.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from app.data_dir import create_private_file
from app.store.db import Connection, Database, Row, StoreConflict, StoreError, StoreFull
from app.store.dialects import SQLITE

BUSY_TIMEOUT_MS = 10_000


class SQLiteDatabase(Database):
    """A SQLite file with per-thread connections and migrations applied at open."""

    dialect = SQLITE

    def __init__(self, path: Path, migrations: Sequence[str] | None) -> None:
        """Open (creating if needed) ``path`` and bring its schema up to ``migrations`` (None:
        leave it as it is, to inspect it)."""
        self.path = path
        self._local = threading.local()
        self._held: weakref.WeakSet[_Held] = weakref.WeakSet()
        path.parent.mkdir(parents=True, exist_ok=True)
        # Private from the start: SQLite gives the WAL and SHM files the database's mode.
        create_private_file(path)
        if migrations is not None:
            self.migrate(migrations)

    @property
    def location(self) -> str:
        """The database file."""
        return str(self.path)

    @property
    def connection_count(self) -> int:
        """Connections open now (one per thread that used the database and is still alive)."""
        return len(self._held)

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (opened on first use; closed when the thread ends)."""
        held: _Held | None = getattr(self._local, "held", None)
        if held is None:
            held = _Held(self._connect())
            # The thread-local is the only strong reference: when the thread ends (anyio's
            # worker threads come and go), the connection is closed instead of leaking.
            weakref.finalize(held, held.connection.close)
            self._local.held = held
            self._local.depth = 0
            self._held.add(held)
        return held.connection

    def _connect(self) -> sqlite3.Connection:
        try:
            # isolation_level=None: no implicit transactions, ours are explicit.
            connection = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=10.0
            )
            connection.row_factory = sqlite3.Row
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = NORMAL")
            connection.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as exc:
            error = _store_error_class(exc)
            raise error(f"cannot open the database {str(self.path)!r}: {exc}") from exc
        return connection

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A write transaction on this thread's connection; joins an enclosing one."""
        connection = self.connection()
        if self._local.depth > 0:
            self._local.depth += 1
            try:
                yield connection
            finally:
                self._local.depth -= 1
            return
        with _store_errors():
            connection.execute("BEGIN IMMEDIATE")
            self._local.depth = 1
            try:
                yield connection
            except BaseException:
                if connection.in_transaction:  # SQLite already rolled back on a full disk
                    connection.execute("ROLLBACK")
                raise
            else:
                connection.execute("COMMIT")
            finally:
                self._local.depth = 0

    def query(self, sql: str, parameters: Sequence[Any] = ()) -> list[Row]:
        """Rows of a read-only statement."""
        with _store_errors():
            return self.connection().execute(sql, parameters).fetchall()

    def server_version(self) -> str:
        """SQLite's library version."""
        return f"SQLite {sqlite3.sqlite_version}"

    def close(self) -> None:
        """Close every thread's connection; the object must not be used afterwards."""
        for held in list(self._held):
            held.connection.close()
        self._local = threading.local()


class _Held:
    """A thread's connection, in an object that can be weakly referenced."""

    __slots__ = ("__weakref__", "connection")

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection


@contextlib.contextmanager
def _store_errors() -> Iterator[None]:
    """SQLite's exceptions as :class:`StoreError`, with the database's message."""
    try:
        yield
    except sqlite3.IntegrityError as exc:
        raise StoreConflict(f"the store refused a write: {exc}") from exc
    except sqlite3.Error as exc:
        raise _store_error_class(exc)(f"the store failed: {exc}") from exc


def _store_error_class(exc: sqlite3.Error) -> type[StoreError]:
    """:class:`StoreFull` when the disk is full, else :class:`StoreError`."""
    full = getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
    return StoreFull if full or "disk is full" in str(exc) else StoreError
