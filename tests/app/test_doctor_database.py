"""``kiln doctor``'s database check on SQLite and on a real Postgres."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli.doctor_database import check_database, judged
from app.store import Store, StoreStatus
from app.store.schema import MIGRATIONS
from tests.postgres_server import PostgresServer
from tests.servers import free_port

SECRET = "a-test-secret-of-some-length"


def test_a_missing_sqlite_file_is_fine_and_left_uncreated(tmp_path: Path) -> None:
    result = check_database({}, tmp_path)
    assert result.ok, result
    assert "made by kiln serve" in result.detail
    assert not (tmp_path / "kiln.db").exists()


def test_a_migrated_sqlite_file_is_current(tmp_path: Path) -> None:
    Store(tmp_path / "kiln.db", SECRET).close()
    result = check_database({}, tmp_path)
    assert result.ok, result
    assert result.detail.startswith("SQLite ")
    assert "is current" in result.detail


def test_postgres_reports_its_version_pool_and_pending_migrations(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    with postgres_server.fresh_url() as url:
        env = {"KILN_DATABASE_URL": url, "KILN_DATABASE_POOL": "7"}
        fresh = check_database(env, tmp_path)
        assert fresh.ok, fresh
        pending = f"migrations pending ({len(MIGRATIONS)}): applied at the next start"
        assert pending in fresh.detail
        Store(url, SECRET).close()
        current = check_database(env, tmp_path)
    assert current.ok, current
    assert current.detail.startswith("PostgreSQL ")
    assert "max_connections 200" in current.detail
    assert "pool of 7" in current.detail
    assert "is current" in current.detail


@pytest.mark.parametrize(
    ("url", "said"),
    [
        pytest.param("mysql://u:pw-secret@h/d", "must be a postgresql:// URL", id="scheme"),
        pytest.param("postgresql://u:pw-secret@127.0.0.1:{port}/d", "cannot reach", id="down"),
    ],
)
def test_a_bad_or_unreachable_database_fails_with_a_hint(
    tmp_path: Path, url: str, said: str
) -> None:
    result = check_database({"KILN_DATABASE_URL": url.format(port=free_port())}, tmp_path)
    assert not result.ok
    assert said in result.detail
    assert "pw-secret" not in result.detail
    assert "KILN_DATABASE_URL" in result.hint


def test_a_database_migrated_by_a_newer_kiln_fails() -> None:
    status = StoreStatus("postgres", "postgresql://h/d", "PostgreSQL 16.1", 5, 3, 10)
    result = judged(status)
    assert not result.ok
    assert "a newer kiln" in result.hint
