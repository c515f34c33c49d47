"""The service's persistent state: a small repository layer over SQLite (WAL).

:class:`Store` composes one class per table group (users/tokens/keys, chats/messages, runs,
run events/checkpoints) over one :class:`~app.store.db.Database`. Its methods are synchronous
and thread-safe (one connection per thread): async code calls them through
``anyio.to_thread.run_sync``. Another database can be added later by implementing the same
methods; nothing outside this package sees SQL. The wiring is ``docs/service-contract.md``.

Secrets: tokens are stored as SHA-256 hashes, provider keys encrypted (:mod:`app.store.crypto`);
neither appears in a record's ``repr`` or in a log line.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from app.store.app_env import AppEnvTables, AppVariable
from app.store.chats import ChatTables
from app.store.crypto import SecretBox
from app.store.db import Database, StoreConflict, StoreError, StoreFull
from app.store.models import (
    ACTIVE_STATUSES,
    CANCELLED,
    COMPLETED,
    FAILED,
    QUEUED,
    RUNNING,
    TERMINAL_STATUSES,
    Chat,
    Message,
    Run,
    User,
    new_id,
)
from app.store.run_events import RunEventTables
from app.store.runs import RunTables
from app.store.schema import MIGRATIONS
from app.store.users import UserTables

__all__ = [
    "ACTIVE_STATUSES",
    "CANCELLED",
    "COMPLETED",
    "FAILED",
    "QUEUED",
    "RUNNING",
    "TERMINAL_STATUSES",
    "AppVariable",
    "Chat",
    "Message",
    "Run",
    "Store",
    "StoreConflict",
    "StoreError",
    "StoreFull",
    "User",
    "new_id",
]


class Store(UserTables, ChatTables, RunTables, RunEventTables, AppEnvTables):
    """Every table of the service behind plain methods (listed in the service contract)."""

    def __init__(self, path: Path, secret_key: str) -> None:
        """Open (and migrate) the database at ``path``; ``secret_key`` encrypts provider keys."""
        self._db = Database(path, MIGRATIONS)
        self._box = SecretBox(secret_key)

    def __repr__(self) -> str:
        return f"Store({str(self._db.path)!r})"

    @property
    def path(self) -> Path:
        """The database file."""
        return self._db.path

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Make the store calls inside one atomic step (on the calling thread)."""
        with self._db.transaction():
            yield

    def schema_version(self) -> int:
        """The number of schema migrations applied."""
        return self._db.schema_version()

    def ping(self) -> None:
        """Raise :class:`StoreError` unless the database answers (for ``/healthz``)."""
        self._db.query_one("SELECT 1")

    def close(self) -> None:
        """Close every connection."""
        self._db.close()
