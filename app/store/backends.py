"""Which database the store opens: Postgres for a ``postgresql://`` URL, else a SQLite file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from app.store.db import Database
from app.store.sqlite_db import SQLiteDatabase

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
DEFAULT_POOL_SIZE = 10


def is_postgres_url(location: str | Path) -> bool:
    """Whether ``location`` names a Postgres database (rather than a SQLite file)."""
    return isinstance(location, str) and location.startswith(POSTGRES_SCHEMES)


def open_database(
    location: str | Path, migrations: Sequence[str], *, pool_size: int = DEFAULT_POOL_SIZE
) -> Database:
    """The database at ``location`` (a ``postgresql://`` URL or a SQLite file), migrated."""
    if is_postgres_url(location):
        # Imported here: the embedded default never loads the Postgres driver.
        from app.store.postgres_db import PostgresDatabase

        return PostgresDatabase(str(location), migrations, pool_size=pool_size)
    return SQLiteDatabase(Path(location), migrations)
