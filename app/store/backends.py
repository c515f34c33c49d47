"""Which database the store opens: Postgres for a ``postgresql://`` URL, else a SQLite file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from app.database_url import DEFAULT_POOL_SIZE, is_postgres_url
from app.store.db import Database
from app.store.sqlite_db import SQLiteDatabase


def open_database(
    location: str | Path,
    migrations: Sequence[str] | None,
    *,
    pool_size: int = DEFAULT_POOL_SIZE,
) -> Database:
    """The database at ``location`` (a ``postgresql://`` URL or a SQLite file), migrated
    (``migrations`` None: as it is)."""
    if is_postgres_url(location):
        # Imported here: the embedded default never loads the Postgres driver.
        from app.store.postgres_db import PostgresDatabase

        return PostgresDatabase(str(location), migrations, pool_size=pool_size)
    return SQLiteDatabase(Path(location), migrations)
