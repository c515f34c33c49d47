"""The service's persistent state: one repository layer over SQLite (WAL) or Postgres.

:class:`Store` composes one class per table group (users/tokens/keys, chats/messages, runs, run
events/checkpoints, remotes, publications) over one :class:`~app.store.db.Database`: a SQLite file
in the data dir (the embedded default) or, for a ``postgresql://`` URL (``KILN_DATABASE_URL``),
Postgres through a bounded pool. The SQL is written once; :mod:`app.store.dialects` says how each
database speaks it. Its methods are synchronous and thread-safe: async code calls them through
``anyio.to_thread.run_sync``. Nothing outside this package sees SQL. The wiring is
``docs/service-contract.md``.

Secrets: tokens are stored as SHA-256 hashes, provider keys encrypted (:mod:`app.store.crypto`);
neither appears in a record's ``repr`` or in a log line.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from app.database_url import DEFAULT_POOL_SIZE
from app.store.app_env import AppEnvTables, AppVariable
from app.store.backends import open_database
from app.store.chats import ChatTables
from app.store.crypto import SecretBox
from app.store.db import StoreConflict, StoreError, StoreFull
from app.store.deployment import DeploymentTables
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
from app.store.publications import Publication, PublicationTables
from app.store.publish_jobs import PublishJob, PublishJobTables
from app.store.remotes import ChatRemote, RemoteTables
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
    "ChatRemote",
    "Message",
    "Publication",
    "PublishJob",
    "Run",
    "Store",
    "StoreConflict",
    "StoreError",
    "StoreFull",
    "StoreStatus",
    "User",
    "inspect_database",
    "inspect_deployment",
    "new_id",
]


@dataclass(frozen=True)
class StoreStatus:
    """The database under a store, as ``kiln doctor`` shows it."""

    backend: str
    location: str
    server_version: str
    schema_version: int
    migrations: int
    pool_size: int | None


def inspect_database(location: Path | str, pool_size: int = DEFAULT_POOL_SIZE) -> StoreStatus:
    """The database at ``location`` as ``kiln doctor`` shows it, changing nothing (no
    migration); :class:`StoreError` when it does not answer."""
    database = open_database(location, None, pool_size=pool_size)
    try:
        server = database.server_version()
        try:
            applied = database.schema_version()
        except StoreError:  # no schema_version table: a database kiln never opened
            applied = 0
        return StoreStatus(
            backend=database.dialect.name,
            location=database.location,
            server_version=server,
            schema_version=applied,
            migrations=len(MIGRATIONS),
            pool_size=pool_size if database.dialect.name == "postgres" else None,
        )
    finally:
        database.close()


def inspect_deployment(location: Path | str, pool_size: int = DEFAULT_POOL_SIZE) -> dict[str, str]:
    """The deployment record of the database at ``location`` (:mod:`app.store.deployment`),
    changing nothing; empty before a host wrote it (or a kiln that has no such table)."""
    database = open_database(location, None, pool_size=pool_size)
    try:
        rows = database.query("SELECT name, value FROM deployment")
    except StoreError:  # no deployment table yet: migrated by the next start
        return {}
    finally:
        database.close()
    return {str(row["name"]): str(row["value"]) for row in rows}


class Store(
    UserTables,
    ChatTables,
    RunTables,
    RunEventTables,
    RemoteTables,
    PublicationTables,
    PublishJobTables,
    AppEnvTables,
    DeploymentTables,
):
    """Every table of the service behind plain methods (listed in the service contract)."""

    def __init__(
        self, location: Path | str, secret_key: str, *, pool_size: int = DEFAULT_POOL_SIZE
    ) -> None:
        """Open (and migrate) the database at ``location`` (a SQLite file, or a
        ``postgresql://`` URL with at most ``pool_size`` connections); ``secret_key`` encrypts
        provider keys."""
        self._db = open_database(location, MIGRATIONS, pool_size=pool_size)
        self._box = SecretBox(secret_key)

    def __repr__(self) -> str:
        return f"Store({self._db.location!r})"

    @property
    def path(self) -> Path | None:
        """The SQLite file (None on Postgres)."""
        path: Path | None = getattr(self._db, "path", None)
        return path

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
