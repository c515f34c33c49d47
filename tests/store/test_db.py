"""The database layer: migrations, WAL, transactions, per-thread connections."""

from __future__ import annotations

import gc
import os
import sqlite3
import stat
import threading
from pathlib import Path

import pytest

from app.store.db import Database, StoreConflict, StoreError, StoreFull
from app.store.schema import MIGRATIONS

EXTRA = "CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT NOT NULL)"


def tables(database: Database) -> set[str]:
    rows = database.query("SELECT name FROM sqlite_master WHERE type = 'table'")
    return {row["name"] for row in rows}


def test_opening_twice_applies_each_migration_once(tmp_path: Path) -> None:
    first = Database(tmp_path / "kiln.db", MIGRATIONS)
    with first.transaction() as db:
        db.execute("INSERT INTO users (id, name, created) VALUES ('u1', 'ann', 1.0)")
    first.close()
    second = Database(tmp_path / "kiln.db", MIGRATIONS)
    assert second.schema_version() == len(MIGRATIONS)
    versions = [row["version"] for row in second.query("SELECT version FROM schema_version")]
    assert versions == list(range(1, len(MIGRATIONS) + 1))
    assert [row["name"] for row in second.query("SELECT name FROM users")] == ["ann"]
    second.close()


def test_a_new_migration_is_applied_to_an_existing_database(tmp_path: Path) -> None:
    Database(tmp_path / "kiln.db", MIGRATIONS).close()
    upgraded = Database(tmp_path / "kiln.db", (*MIGRATIONS, EXTRA))
    assert upgraded.schema_version() == len(MIGRATIONS) + 1
    assert "notes" in tables(upgraded)
    upgraded.close()


def test_a_failing_migration_leaves_nothing_behind(tmp_path: Path) -> None:
    Database(tmp_path / "kiln.db", MIGRATIONS).close()
    broken = f"{EXTRA}; CREATE TABLE users (id TEXT PRIMARY KEY)"
    with pytest.raises(StoreError, match="already exists"):
        Database(tmp_path / "kiln.db", (*MIGRATIONS, broken))
    reopened = Database(tmp_path / "kiln.db", MIGRATIONS)
    assert reopened.schema_version() == len(MIGRATIONS)
    assert "notes" not in tables(reopened)
    reopened.close()


def test_connections_use_wal_busy_timeout_and_foreign_keys(tmp_path: Path) -> None:
    database = Database(tmp_path / "kiln.db", MIGRATIONS)
    connection = database.connection()
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert connection.execute("PRAGMA busy_timeout").fetchone()[0] >= 1000
    assert connection.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    with pytest.raises(StoreConflict, match="FOREIGN KEY"), database.transaction() as db:
        db.execute("INSERT INTO chats (id, user_id, title, created) VALUES ('c', 'nobody', 't', 1)")
    database.close()


def test_a_full_disk_is_store_full_with_its_own_code(tmp_path: Path) -> None:
    database = Database(tmp_path / "kiln.db", MIGRATIONS)
    pages = database.connection().execute("PRAGMA page_count").fetchone()[0]
    database.connection().execute(f"PRAGMA max_page_count = {pages}")  # SQLite's SQLITE_FULL
    with pytest.raises(StoreFull, match="full") as raised, database.transaction() as db:
        db.execute("INSERT INTO users (id, name, created) VALUES (?, 'ann', 1.0)", ("x" * 9000,))
    assert raised.value.code == "disk_full"
    database.close()


def test_an_inner_transaction_joins_the_outer_one(tmp_path: Path) -> None:
    database = Database(tmp_path / "kiln.db", MIGRATIONS)

    def nested_then_fail() -> None:
        with database.transaction() as outer:
            outer.execute("INSERT INTO users (id, name, created) VALUES ('u1', 'ann', 1.0)")
            with database.transaction() as inner:
                inner.execute("INSERT INTO users (id, name, created) VALUES ('u2', 'bob', 1.0)")
            raise RuntimeError("abort the whole step")

    with pytest.raises(RuntimeError):
        nested_then_fail()
    assert database.query("SELECT * FROM users") == []
    database.close()


def test_each_thread_gets_its_own_connection(tmp_path: Path) -> None:
    database = Database(tmp_path / "kiln.db", MIGRATIONS)
    seen: list[sqlite3.Connection] = []
    errors: list[BaseException] = []

    def write(index: int) -> None:
        try:
            seen.append(database.connection())
            for step in range(20):
                with database.transaction() as db:
                    db.execute(
                        "INSERT INTO users (id, name, created) VALUES (?, ?, 1.0)",
                        (f"{index}-{step}", f"user-{index}-{step}"),
                    )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(index,)) for index in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len({id(connection) for connection in seen}) == 6
    assert database.query("SELECT COUNT(*) AS n FROM users")[0]["n"] == 120
    seen.clear()
    gc.collect()
    assert database.connection_count == 1  # the ended threads' connections were closed
    database.close()


def test_the_database_and_its_wal_and_shm_are_private(tmp_path: Path) -> None:
    before = os.umask(0o022)
    try:
        database = Database(tmp_path / "kiln.db", MIGRATIONS)
        with database.transaction() as db:
            db.execute("INSERT INTO users (id, name, created) VALUES ('u1', 'ann', 1.0)")
        files = sorted(tmp_path.iterdir())
        found = {path.name: stat.S_IMODE(path.stat().st_mode) for path in files}
        database.close()
    finally:
        os.umask(before)
    assert found == {"kiln.db": 0o600, "kiln.db-wal": 0o600, "kiln.db-shm": 0o600}
