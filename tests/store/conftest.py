"""A fresh store in a temporary directory for each test."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.store import Store

SECRET = "a-test-secret-of-some-length"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """An empty, migrated store."""
    opened = Store(tmp_path / "kiln.db", SECRET)
    yield opened
    opened.close()


def raw_rows(store: Store, sql: str) -> list[tuple[object, ...]]:
    """Rows read with a plain sqlite3 connection, bypassing the store."""
    with sqlite3.connect(store.path) as connection:
        return [tuple(row) for row in connection.execute(sql).fetchall()]
