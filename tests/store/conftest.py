"""A fresh store for each test, on each database: a SQLite file, and a real Postgres."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from app.store import Store
from app.store.postgres_db import PostgresDatabase
from tests.postgres_server import PostgresServer

SECRET = "a-test-secret-of-some-length"

BACKENDS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres")]


@pytest.fixture(params=BACKENDS)
def database_location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path | str]:
    """Where an empty database is: a SQLite file, or the URL of a fresh Postgres schema."""
    if request.param == "sqlite":
        yield tmp_path / "kiln.db"
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    with server.fresh_url() as url:
        yield url


@pytest.fixture
def store(database_location: Path | str) -> Iterator[Store]:
    """An empty, migrated store."""
    opened = Store(database_location, SECRET)
    yield opened
    opened.close()


def raw_rows(store: Store, sql: str) -> list[tuple[object, ...]]:
    """Rows read with a plain connection of the database's own driver, bypassing the store."""
    if store.path is not None:
        with sqlite3.connect(store.path) as connection:
            return [tuple(row) for row in connection.execute(sql).fetchall()]
    database = store._db
    assert isinstance(database, PostgresDatabase)
    with psycopg.connect(database.url) as connection:
        return [tuple(row) for row in connection.execute(sql).fetchall()]


def bytes_at_rest(store: Store, table: str) -> bytes:
    """What the database keeps of ``table``, as bytes a reader of its storage would find: the
    SQLite file with its WAL and shared memory, or (Postgres) every raw row of the table read
    with a plain connection."""
    if store.path is not None:
        raw = store.path.read_bytes()
        for suffix in ("-wal", "-shm"):
            sidecar = store.path.with_name(store.path.name + suffix)
            if sidecar.exists():
                raw += sidecar.read_bytes()
        return raw
    rows = raw_rows(store, f"SELECT * FROM {table}")  # a table name of the tests
    assert rows, f"{table} is empty"
    return b"".join(
        bytes(value) if isinstance(value, bytes | memoryview) else str(value).encode()
        for row in rows
        for value in row
    )
