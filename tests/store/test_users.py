"""Users, hashed tokens and encrypted provider keys."""

from __future__ import annotations

import threading
import time

import pytest

from app.store import Store, StoreConflict, User
from app.store.crypto import hash_token
from tests.store.conftest import raw_rows


def test_users_are_found_by_id_and_name(store: Store) -> None:
    ann = store.create_user("ann")
    assert store.get_user(ann.id) == ann
    assert store.user_by_name("ann") == ann
    assert store.user_by_name("bob") is None
    assert ann.to_dict() == {"id": ann.id, "name": "ann"}


def test_a_user_name_is_unique(store: Store) -> None:
    store.create_user("ann")
    with pytest.raises(StoreConflict, match="'ann'"):
        store.create_user("ann")


def test_tokens_are_stored_hashed_never_plain(store: Store) -> None:
    ann = store.create_user("ann")
    token = store.create_token(ann.id, "api")
    rows = raw_rows(store, "SELECT hash, user_id, kind, created, expires FROM tokens")
    assert rows
    assert all(token not in str(value) for row in rows for value in row)
    assert rows[0][0] == hash_token(token)
    assert store.user_for_token(token, "api") == ann


@pytest.mark.parametrize(
    ("kind", "asked", "ttl", "found"),
    [
        pytest.param("api", "api", None, True, id="api-no-expiry"),
        pytest.param("session", "session", 60.0, True, id="session-valid"),
        pytest.param("session", "session", -1.0, False, id="session-expired"),
        pytest.param("session", "api", None, False, id="wrong-kind"),
    ],
)
def test_a_token_is_valid_for_its_kind_until_it_expires(
    store: Store, kind: str, asked: str, ttl: float | None, found: bool
) -> None:
    ann = store.create_user("ann")
    token = store.create_token(ann.id, kind, ttl=ttl)
    assert (store.user_for_token(token, asked) == ann) is found


def test_an_unknown_token_finds_nobody(store: Store) -> None:
    store.create_token(store.create_user("ann").id)
    assert store.user_for_token("made-up", "api") is None


def test_a_login_token_works_once(store: Store) -> None:
    ann = store.create_user("ann")
    token = store.create_token(ann.id, "login", ttl=60)
    assert store.consume_login_token(token) == ann
    assert store.consume_login_token(token) is None


def test_an_expired_login_token_is_refused_and_gone(store: Store) -> None:
    token = store.create_token(store.create_user("ann").id, "login", ttl=-1)
    assert store.consume_login_token(token) is None
    assert raw_rows(store, "SELECT * FROM tokens") == []


def test_concurrent_logins_with_one_token_let_one_in(store: Store) -> None:
    token = store.create_token(store.create_user("ann").id, "login")
    winners: list[User | None] = []
    threads = [
        threading.Thread(target=lambda: winners.append(store.consume_login_token(token)))
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(winner is not None for winner in winners) == 1


def test_a_revoked_token_finds_nobody_and_only_its_kind_is_revoked(store: Store) -> None:
    user = store.create_user("ann")
    session = store.create_token(user.id, "session", 60)
    assert not store.revoke_token(session, "api")  # a session is no API token
    assert store.revoke_token(session, "session")
    assert store.user_for_token(session, "session") is None
    assert not store.revoke_token(session, "session")  # gone already


def test_revoking_sessions_ends_sessions_and_links_of_that_user_only(store: Store) -> None:
    ann, bob = store.create_user("ann"), store.create_user("bob")
    tokens = {kind: store.create_token(ann.id, kind, 60) for kind in ("api", "session", "login")}
    bobs = store.create_token(bob.id, "session", 60)
    assert store.revoke_sessions(ann.id) == 2
    assert store.user_for_token(tokens["session"], "session") is None
    assert store.consume_login_token(tokens["login"]) is None
    assert store.user_for_token(tokens["api"], "api") == ann
    assert store.user_for_token(bobs, "session") == bob


def test_an_unknown_token_kind_is_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="'admin'"):
        store.create_token(store.create_user("ann").id, "admin")


def test_provider_keys_are_encrypted_at_rest(store: Store) -> None:
    ann = store.create_user("ann")
    store.set_provider_key(ann.id, "anthropic", "sk-ant-very-secret")
    raw = raw_rows(store, "SELECT user_id, provider, secret, updated FROM provider_keys")
    assert raw
    assert all(b"sk-ant" not in value for row in raw for value in row if isinstance(value, bytes))
    assert all("sk-ant" not in str(value) for row in raw for value in row)
    if store.path is not None:  # SQLite: the file itself (Postgres: the raw rows above)
        assert b"sk-ant-very-secret" not in store.path.read_bytes()
    assert store.provider_keys(ann.id) == {"anthropic": "sk-ant-very-secret"}


def test_a_provider_key_is_replaced_and_listed_by_name(store: Store) -> None:
    ann, bob = store.create_user("ann"), store.create_user("bob")
    store.set_provider_key(ann.id, "openai", "sk-old")
    store.set_provider_key(ann.id, "openai", "sk-new")
    store.set_provider_key(ann.id, "anthropic", "sk-ant")
    assert store.provider_keys(ann.id) == {"openai": "sk-new", "anthropic": "sk-ant"}
    assert store.provider_key_names(ann.id) == ["anthropic", "openai"]
    assert store.provider_key_names(bob.id) == []


def test_the_store_repr_shows_no_secret(store: Store) -> None:
    ann = store.create_user("ann")
    store.set_provider_key(ann.id, "openai", "sk-secret")
    assert "sk-secret" not in repr(store)
    assert "a-test-secret" not in repr(store)
    assert time.time() >= ann.created


def test_a_provider_key_is_deleted(store: Store) -> None:
    ann = store.create_user("ann")
    store.set_provider_key(ann.id, "openai", "sk-one")
    assert store.delete_provider_key(ann.id, "openai")
    assert store.provider_keys(ann.id) == {}
    assert not store.delete_provider_key(ann.id, "openai")
