"""What is Postgres' own in the store: the bounded pool, an unreachable server, the password
kept out of messages (the behaviour shared with SQLite is tested on both in test_db.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest

from app.database_url import redacted
from app.store import Store
from app.store.db import StoreError
from app.store.postgres_db import PostgresDatabase
from app.store.schema import MIGRATIONS
from tests.postgres_server import PostgresServer
from tests.servers import free_port


@pytest.fixture
def url(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh schema's URL."""
    with postgres_server.fresh_url() as fresh:
        yield fresh


def test_many_threads_share_a_pool_that_never_grows_past_its_bound(url: str) -> None:
    database = PostgresDatabase(url, MIGRATIONS, pool_size=2)
    errors: list[BaseException] = []
    most = [0]

    def write(index: int) -> None:
        try:
            for step in range(10):
                with database.transaction() as db:
                    db.execute(
                        "INSERT INTO users (id, name, created) VALUES (?, ?, 1.0)",
                        (f"{index}-{step}", f"user-{index}-{step}"),
                    )
                    most[0] = max(most[0], database.connection_count)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(index,)) for index in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert database.query("SELECT COUNT(*) AS n FROM users")[0]["n"] == 60
    assert 1 <= most[0] <= 2
    database.close()
    assert database.connection_count == 0


def test_a_caller_finding_every_connection_busy_gets_a_store_error(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("app.store.postgres_db.POOL_WAIT_SECONDS", 0.2)
    database = PostgresDatabase(url, MIGRATIONS, pool_size=1)
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with database.transaction():
            held.set()
            release.wait(timeout=60)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(timeout=60)
    with pytest.raises(StoreError, match="all 1 database connections stayed busy"):
        database.query("SELECT 1")
    release.set()
    holder.join()
    assert database.query_one("SELECT 1 AS one") == {"one": 1}
    database.close()


def test_an_unreachable_server_is_a_store_error_without_the_password() -> None:
    url = f"postgresql://kiln:hunter2-secret@127.0.0.1:{free_port()}/kiln"
    with pytest.raises(StoreError, match="cannot reach the database") as raised:
        PostgresDatabase(url, MIGRATIONS)
    assert "hunter2-secret" not in str(raised.value)
    assert ":***@" in str(raised.value)


def test_a_connection_broken_mid_transaction_is_not_lent_again(
    url: str, postgres_server: PostgresServer
) -> None:
    database = PostgresDatabase(url, MIGRATIONS, pool_size=1)
    with pytest.raises(StoreError), database.transaction() as db:
        db.execute("SELECT pg_terminate_backend(pg_backend_pid())")
    assert database.query_one("SELECT 1 AS one") == {"one": 1}  # a new connection
    database.close()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        pytest.param("postgresql://u:pw@h:5432/d", "postgresql://u:***@h:5432/d", id="password"),
        pytest.param("postgresql://u@h/d", "postgresql://u@h/d", id="no-password"),
        pytest.param("postgres://h/d?sslmode=require", "postgres://h/d?sslmode=require", id="bare"),
    ],
)
def test_a_url_is_shown_without_its_password(url: str, shown: str) -> None:
    assert redacted(url) == shown


def test_a_store_on_postgres_names_its_url_without_the_password(url: str) -> None:
    with_password = url.replace("postgresql://kiln@", "postgresql://kiln:pw-secret@")
    store = Store(with_password, "a-test-secret-of-some-length")  # trust auth: any password
    assert store.path is None
    assert "pw-secret" not in repr(store)
    assert ":***@" in repr(store)
    store.close()


def test_idle_connections_the_server_dropped_are_replaced_before_use(
    url: str, postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = PostgresDatabase(url, MIGRATIONS, pool_size=2)
    database.query("SELECT 1")
    with psycopg.connect(postgres_server.url, autocommit=True) as admin:  # a restart's effect
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = 'kiln' AND pid <> pg_backend_pid()"
        )
    monkeypatch.setattr("app.store.postgres_db.IDLE_CHECK_SECONDS", 0.0)
    assert database.query_one("SELECT 1 AS one") == {"one": 1}
    database.close()
