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
