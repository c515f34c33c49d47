"""A chat's app environment at rest: encrypted, per chat, gone with the chat."""

from __future__ import annotations

from app.store import AppVariable, Store
from tests.store.conftest import bytes_at_rest, raw_rows

SECRET_VALUE = "sk_live_do-not-leak-4242"


def test_values_are_encrypted_at_rest(store: Store) -> None:
    ann = store.create_user("ann")
    chat = store.create_chat(ann.id, "app")
    store.set_app_variable(chat.id, AppVariable("STRIPE_KEY", SECRET_VALUE, secret=True))
    store.set_app_variable(chat.id, AppVariable("VITE_API_URL", "https://api.example.test"))
    raw = bytes_at_rest(store, "app_env")
    assert SECRET_VALUE.encode() not in raw
    assert b"https://api.example.test" not in raw
    found = {item.name: item for item in store.app_variables(chat.id)}
    assert found["STRIPE_KEY"].value == SECRET_VALUE
    assert found["STRIPE_KEY"].secret
    assert found["VITE_API_URL"].public
    assert not found["VITE_API_URL"].secret


def test_a_secret_never_shows_in_repr_or_listing(store: Store) -> None:
    ann = store.create_user("ann")
    chat = store.create_chat(ann.id, "app")
    stored = store.set_app_variable(chat.id, AppVariable("TOKEN", SECRET_VALUE, secret=True))
    assert SECRET_VALUE not in repr(stored)
    assert SECRET_VALUE not in repr(store.app_variables(chat.id))
    assert "value" not in stored.listing()
    assert stored.listing()["secret"] is True


def test_set_replaces_delete_forgets_and_chats_are_apart(store: Store) -> None:
    ann = store.create_user("ann")
    first, second = store.create_chat(ann.id, "one"), store.create_chat(ann.id, "two")
    store.set_app_variable(first.id, AppVariable("MODE", "a"))
    store.set_app_variable(first.id, AppVariable("MODE", "b", secret=True))
    assert [(v.name, v.value, v.secret) for v in store.app_variables(first.id)] == [
        ("MODE", "b", True)
    ]
    assert store.app_variables(second.id) == []
    assert store.delete_app_variable(first.id, "MODE")
    assert not store.delete_app_variable(first.id, "MODE")


def test_deleting_the_chat_deletes_its_variables(store: Store) -> None:
    ann = store.create_user("ann")
    chat = store.create_chat(ann.id, "app")
    store.set_app_variable(chat.id, AppVariable("MODE", "a"))
    store.delete_chat(chat.id)
    assert raw_rows(store, "SELECT * FROM app_env") == []
