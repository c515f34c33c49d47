"""A chat's git remote: its token encrypted at rest, kept only for the same URL."""

from __future__ import annotations

import pytest

from app.store import Store
from tests.store.conftest import bytes_at_rest

TOKEN = "ghp_0123456789abcdefSECRET"
URL = "https://git.example/me/app.git"


@pytest.fixture
def chat(store: Store) -> str:
    return store.create_chat(store.create_user("ann").id, "t").id


def test_the_token_is_stored_encrypted_and_never_shown(store: Store, chat: str) -> None:
    store.set_chat_remote(chat, URL, "main", TOKEN)
    remote = store.chat_remote(chat)
    assert remote is not None
    assert remote.token == TOKEN
    assert remote.to_dict() == {"url": URL, "branch": "main", "has_token": True, "last_push": None}
    assert TOKEN not in repr(remote)
    assert TOKEN.encode() not in bytes_at_rest(store, "chat_remotes")


@pytest.mark.parametrize(
    ("url", "kept"),
    [pytest.param(URL, True, id="same-url-keeps"), pytest.param(URL + "x", False, id="new-url")],
)
def test_no_token_given_keeps_it_only_for_the_same_url(
    store: Store, chat: str, url: str, kept: bool
) -> None:
    store.set_chat_remote(chat, URL, "main", TOKEN)
    store.set_chat_remote(chat, url, "dev", None)
    remote = store.chat_remote(chat)
    assert remote is not None
    assert (remote.token == TOKEN) is kept
    assert remote.branch == "dev"


def test_the_last_push_is_kept_and_the_remote_goes_with_its_chat(store: Store, chat: str) -> None:
    store.set_chat_remote(chat, URL, "main", "")
    store.record_push(chat, {"ok": True, "version": 3})
    remote = store.chat_remote(chat)
    assert remote is not None
    assert remote.last_push == {"ok": True, "version": 3}
    assert remote.token == ""
    store.delete_chat(chat)
    assert store.chat_remote(chat) is None
    assert store.delete_chat_remote(chat) is False
