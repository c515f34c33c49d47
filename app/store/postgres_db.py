"""The store on Postgres (``KILN_DATABASE_URL=postgresql://...``): kiln on several hosts.

- **A bounded pool** (:class:`ConnectionPool`, ours: a semaphore and a list of idle
  connections, no extra dependency): at most ``size`` connections per process; a caller that
  finds them all busy waits up to :data:`POOL_WAIT_SECONDS`, then gets a :class:`StoreError`.
  A read borrows a connection for one statement; a transaction keeps its connection on its
  thread until it ends, so an inner transaction or read on that thread joins it.
- **Transactions** are ``BEGIN`` ... ``COMMIT`` at Postgres' default isolation (read committed):
  status changes are conditional ``UPDATE``\\ s, which Postgres re-checks on the row after a
  concurrent writer commits (exactly one claim wins); a run's event numbers are taken under
  the run's row lock (:meth:`app.store.db.Database.lock_row`).
- **Errors**: psycopg's integrity errors are :class:`StoreConflict`, ``disk_full``
  :class:`StoreFull`, the rest (unreachable server, a dropped connection) :class:`StoreError`;
  a connection that broke is closed, not returned to the pool.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
import psycopg.errors
from psycopg.rows import DictRow, dict_row

from app.database_url import DEFAULT_POOL_SIZE, redacted
from app.store.db import Connection, Cursor, Database, Row, StoreConflict, StoreError, StoreFull
from app.store.dialects import POSTGRES

POOL_WAIT_SECONDS = 30.0
# A connection idle this long is pinged before it is lent: the server may have restarted or a
# proxy dropped it meanwhile, and the caller should get a working one, not that error.
IDLE_CHECK_SECONDS = 5.0
CONNECT_TIMEOUT_SECONDS = 10

RawConnection = psycopg.Connection[DictRow]


class PostgresDatabase(Database):
    """A Postgres database reached through a bounded pool; migrations applied at open."""

    dialect = POSTGRES

    def __init__(
        self, url: str, migrations: Sequence[str] | None, *, pool_size: int = DEFAULT_POOL_SIZE
    ) -> None:
        """Connect to ``url`` and bring its schema up to ``migrations`` (None: leave it as it
        is, to inspect it)."""
        self.url = url
        self.pool = ConnectionPool(url, pool_size)
        self._local = threading.local()
        if migrations is None:
            return
        try:
            self.migrate(migrations)
        except BaseException:
            self.pool.close()
            raise

    @property
    def location(self) -> str:
        """The URL without its password."""
        return redacted(self.url)

    @property
    def connection_count(self) -> int:
        """Connections open now (idle in the pool or in use)."""
        return self.pool.open_count

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A transaction on a pooled connection held by this thread; joins an enclosing one."""
        held: _Statements | None = getattr(self._local, "held", None)
        if held is not None:
            yield held
            return
        with self.pool.connection() as raw, _store_errors():
            held = _Statements(raw)
            raw.execute("BEGIN")
            self._local.held = held
            try:
                yield held
            except BaseException:
                if not raw.closed:
                    raw.execute("ROLLBACK")
                raise
            else:
                raw.execute("COMMIT")
            finally:
                self._local.held = None

    def query(self, sql: str, parameters: Sequence[Any] = ()) -> list[Row]:
        """Rows of a read-only statement (inside this thread's transaction if one is open)."""
        held: _Statements | None = getattr(self._local, "held", None)
        if held is not None:
            with _store_errors():
                return held.execute(sql, parameters).fetchall()
        with self.pool.connection() as raw, _store_errors():
            return _Statements(raw).execute(sql, parameters).fetchall()

    def server_version(self) -> str:
        """``PostgreSQL <major>.<minor>`` of the server, with its connection limit."""
        with self.pool.connection() as raw, _store_errors():
            number = raw.info.server_version  # e.g. 150014
            limit = raw.execute("SHOW max_connections").fetchone()
        most = limit["max_connections"] if limit else "?"
        return f"PostgreSQL {number // 10000}.{number % 10000} (max_connections {most})"

    def close(self) -> None:
        """Close every pooled connection."""
        self.pool.close()


class _Statements:
    """A pooled connection speaking the store's SQLite-style SQL (:data:`POSTGRES`)."""

    __slots__ = ("raw",)

    def __init__(self, raw: RawConnection) -> None:
        self.raw = raw

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor:
        """Run one statement (always with a parameter tuple: ``%%`` then means ``%``)."""
        return self.raw.execute(POSTGRES.query(sql), tuple(parameters))

    def executemany(self, sql: str, parameters: Sequence[Sequence[Any]], /) -> Cursor:
        """Run one statement once per parameter row (pipelined by psycopg)."""
        cursor = self.raw.cursor()
        cursor.executemany(POSTGRES.query(sql), [tuple(row) for row in parameters])
        return cursor


class ConnectionPool:
    """At most ``size`` connections to ``url``, opened on demand and reused."""

    def __init__(self, url: str, size: int) -> None:
        """A pool of up to ``size`` connections (none opened yet)."""
        self.url = url
        self.size = size
        self._slots = threading.BoundedSemaphore(size)
        self._idle: list[tuple[RawConnection, float]] = []  # with when it was given back
        self._lock = threading.Lock()
        self._open = 0

    @property
    def open_count(self) -> int:
        """Connections open now."""
        return self._open

    @contextlib.contextmanager
    def connection(self) -> Iterator[RawConnection]:
        """A connection for the caller alone until the block ends."""
        if not self._slots.acquire(timeout=POOL_WAIT_SECONDS):
            raise StoreError(
                f"all {self.size} database connections stayed busy for {POOL_WAIT_SECONDS:g} s"
                f" ({redacted(self.url)!r}); raise KILN_DATABASE_POOL or the server's limit"
            )
        try:
            raw = self._take()
            try:
                yield raw
            finally:
                self._give_back(raw)
        finally:
            self._slots.release()

    def _take(self) -> RawConnection:
        while True:
            with self._lock:
                if not self._idle:
                    break
                raw, since = self._idle.pop()
            if time.monotonic() - since < IDLE_CHECK_SECONDS or _answers(raw):
                return raw
            self._discard(raw)
        with _store_errors(f"cannot reach the database {redacted(self.url)!r}: "):
            raw = psycopg.connect(
                self.url,
                autocommit=True,  # our transactions are explicit, as on SQLite
                row_factory=dict_row,
                connect_timeout=CONNECT_TIMEOUT_SECONDS,
                application_name="kiln",
            )
        with self._lock:
            self._open += 1
        return raw

    def _give_back(self, raw: RawConnection) -> None:
        idle = psycopg.pq.TransactionStatus.IDLE
        if not raw.closed and raw.info.transaction_status == idle:
            with self._lock:
                self._idle.append((raw, time.monotonic()))
            return
        self._discard(raw)  # broken, or left inside a transaction: never lent again

    def _discard(self, raw: RawConnection) -> None:
        raw.close()
        with self._lock:
            self._open -= 1

    def close(self) -> None:
        """Close the idle connections (those in use are closed when given back)."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._open -= len(idle)
        for raw, _since in idle:
            raw.close()


def _answers(raw: RawConnection) -> bool:
    """Whether a pooled connection still reaches the server (one round trip)."""
    try:
        raw.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


@contextlib.contextmanager
def _store_errors(prefix: str = "the store failed: ") -> Iterator[None]:
    """psycopg's exceptions as :class:`StoreError`, with the server's message."""
    try:
        yield
    except psycopg.errors.IntegrityError as exc:
        raise StoreConflict(f"the store refused a write: {exc}") from exc
    except psycopg.errors.DiskFull as exc:
        raise StoreFull(f"{prefix}{exc}") from exc
    except psycopg.Error as exc:
        raise StoreError(f"{prefix}{exc}") from exc
