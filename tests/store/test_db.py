"""The database layer on both databases: migrations, transactions, errors; and what is
SQLite's own (WAL, per-thread connections, private files, a full disk)."""

from __future__ import annotations

import gc
import os
import sqlite3
import stat
import threading
from pathlib import Path

import pytest

from app.store.backends import open_database
from app.store.db import Database, StoreConflict, StoreError, StoreFull
from app.store.schema import MIGRATIONS
from app.store.sqlite_db import SQLiteDatabase

EXTRA = "CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT NOT NULL)"
# Every portable type another migration may use, and SQLite's rowid for insertion order.
PORTABLE = (
    "CREATE TABLE blobs (id TEXT PRIMARY KEY, body BLOB, size INTEGER NOT NULL DEFAULT 0,"
    " ratio REAL, note TEXT CHECK (note IS NULL OR note <> '50%?'))"
)


def has_table(database: Database, name: str) -> bool:
    try:
        database.query(f"SELECT COUNT(*) AS n FROM {name}")
    except StoreError:
        return False
    return True


def test_opening_twice_applies_each_migration_once(database_location: Path | str) -> None:
    first = open_database(database_location, MIGRATIONS)
    with first.transaction() as db:
        db.execute("INSERT INTO users (id, name, created) VALUES ('u1', 'ann', 1.0)")
    first.close()
    second = open_database(database_location, MIGRATIONS)
    assert second.schema_version() == len(MIGRATIONS)
    versions = [row["version"] for row in second.query("SELECT version FROM schema_version")]
    assert versions == list(range(1, len(MIGRATIONS) + 1))
    assert [row["name"] for row in second.query("SELECT name FROM users")] == ["ann"]
    second.close()


def test_a_new_migration_is_applied_to_an_existing_database(database_location: Path | str) -> None:
    open_database(database_location, MIGRATIONS).close()
    upgraded = open_database(database_location, (*MIGRATIONS, EXTRA))
    assert upgraded.schema_version() == len(MIGRATIONS) + 1
    assert has_table(upgraded, "notes")
    upgraded.close()


def test_a_migration_in_portable_sql_runs_and_keeps_bytes_numbers_and_order(
    database_location: Path | str,
) -> None:
    database = open_database(database_location, (*MIGRATIONS, PORTABLE))
    rows = [("b", b"\x00\xffraw", 2**40, 0.1), ("a", b"", 0, 1e300)]
    with database.transaction() as db:
        for row in rows:
            db.execute("INSERT INTO blobs (id, body, size, ratio) VALUES (?, ?, ?, ?)", row)
    with pytest.raises(StoreConflict, match=r"(?i)check"), database.transaction() as db:
        db.execute("INSERT INTO blobs (id, size, note) VALUES ('c', 0, '50%?')")
    found = database.query("SELECT id, body, size, ratio FROM blobs ORDER BY rowid")
    assert [(r["id"], bytes(r["body"]), r["size"], r["ratio"]) for r in found] == rows
    database.close()


def test_insert_or_ignore_skips_a_duplicate(database_location: Path | str) -> None:
    database = open_database(database_location, MIGRATIONS)
    for name in ("ann", "ann-again"):
        with database.transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO users (id, name, created) VALUES ('u1', ?, 1)", (name,)
            )
    assert [row["name"] for row in database.query("SELECT name FROM users")] == ["ann"]
    database.close()


def test_a_failing_migration_leaves_nothing_behind(database_location: Path | str) -> None:
    open_database(database_location, MIGRATIONS).close()
    broken = f"{EXTRA}; CREATE TABLE users (id TEXT PRIMARY KEY)"
    with pytest.raises(StoreError, match="already exists"):
        open_database(database_location, (*MIGRATIONS, broken))
    reopened = open_database(database_location, MIGRATIONS)
    assert reopened.schema_version() == len(MIGRATIONS)
    assert not has_table(reopened, "notes")
    reopened.close()


def test_two_processes_opening_a_new_database_migrate_it_once(
    database_location: Path | str,
) -> None:
    opened: list[Database] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            opened.append(open_database(database_location, (*MIGRATIONS, EXTRA)))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    rows = opened[0].query("SELECT version FROM schema_version ORDER BY version")
    assert [row["version"] for row in rows] == list(range(1, len(MIGRATIONS) + 2))
    for database in opened:
        database.close()


def test_a_foreign_key_or_unique_refusal_is_a_store_conflict(
    database_location: Path | str,
) -> None:
    database = open_database(database_location, MIGRATIONS)
    with pytest.raises(StoreConflict, match=r"(?i)foreign key"), database.transaction() as db:
        db.execute("INSERT INTO chats (id, user_id, title, created) VALUES ('c', 'nobody', 't', 1)")
    with database.transaction() as db:
        db.execute("INSERT INTO users (id, name, created) VALUES ('u1', 'ann', 1.0)")
    with pytest.raises(StoreConflict, match=r"(?i)unique|duplicate"), database.transaction() as db:
        db.execute("INSERT INTO users (id, name, created) VALUES ('u2', 'ann', 1.0)")
    assert [row["id"] for row in database.query("SELECT id FROM users")] == ["u1"]
    database.close()


def test_an_inner_transaction_joins_the_outer_one(database_location: Path | str) -> None:
    database = open_database(database_location, MIGRATIONS)

    def nested_then_fail() -> None:
        with database.transaction() as outer:
            outer.execute("INSERT INTO users (id, name, created) VALUES ('u1', 'ann', 1.0)")
            with database.transaction() as inner:
                inner.execute("INSERT INTO users (id, name, created) VALUES ('u2', 'bob', 1.0)")
            # A read inside the transaction sees its writes.
            assert len(database.query("SELECT * FROM users")) == 2
            raise RuntimeError("abort the whole step")

    with pytest.raises(RuntimeError):
        nested_then_fail()
    assert database.query("SELECT * FROM users") == []
    database.close()


def test_sqlite_connections_use_wal_busy_timeout_and_foreign_keys(tmp_path: Path) -> None:
    database = SQLiteDatabase(tmp_path / "kiln.db", MIGRATIONS)
    connection = database.connection()
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert connection.execute("PRAGMA busy_timeout").fetchone()[0] >= 1000
    assert connection.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    database.close()


def test_a_full_sqlite_disk_is_store_full_with_its_own_code(tmp_path: Path) -> None:
    database = SQLiteDatabase(tmp_path / "kiln.db", MIGRATIONS)
    pages = database.connection().execute("PRAGMA page_count").fetchone()[0]
    database.connection().execute(f"PRAGMA max_page_count = {pages}")  # SQLite's SQLITE_FULL
    with pytest.raises(StoreFull, match="full") as raised, database.transaction() as db:
        db.execute("INSERT INTO users (id, name, created) VALUES (?, 'ann', 1.0)", ("x" * 9000,))
    assert raised.value.code == "disk_full"
    database.close()


def test_each_sqlite_thread_gets_its_own_connection(tmp_path: Path) -> None:
    database = SQLiteDatabase(tmp_path / "kiln.db", MIGRATIONS)
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


def test_the_sqlite_database_and_its_wal_and_shm_are_private(tmp_path: Path) -> None:
    before = os.umask(0o022)
    try:
        database = SQLiteDatabase(tmp_path / "kiln.db", MIGRATIONS)
        with database.transaction() as db:
            db.execute("INSERT INTO users (id, name, created) VALUES ('u1', 'ann', 1.0)")
        files = sorted(tmp_path.iterdir())
        found = {path.name: stat.S_IMODE(path.stat().st_mode) for path in files}
        database.close()
    finally:
        os.umask(before)
    assert found == {"kiln.db": 0o600, "kiln.db-wal": 0o600, "kiln.db-shm": 0o600}
