"""app/store/publications.py: a chat's link, its slug kept for good, moved by one UPDATE."""

from __future__ import annotations

import re

from app.store import Store
from app.store.publications import SLUG_LENGTH, new_slug


def chat_of(store: Store) -> str:
    user = store.create_user("ann")
    return store.create_chat(user.id, "site").id


def test_a_slug_is_a_dns_label_nobody_guesses() -> None:
    slugs = {new_slug() for _ in range(200)}
    assert len(slugs) == 200
    assert all(re.fullmatch(f"[a-z2-7]{{{SLUG_LENGTH}}}", slug) for slug in slugs)


def test_reserving_makes_one_unpublished_row_and_keeps_it(store: Store) -> None:
    chat = chat_of(store)
    assert store.publication(chat) is None
    first = store.reserve_slug(chat)
    assert (first.live, first.manifest, first.version) == (False, None, None)
    assert store.reserve_slug(chat).slug == first.slug


def test_publishing_moves_the_link_and_unpublishing_keeps_the_slug(store: Store) -> None:
    chat = chat_of(store)
    slug = store.reserve_slug(chat).slug
    store.set_publication(chat, "m1", 1)
    store.set_publication(chat, "m2", 2)
    found = store.publication_by_slug(slug)
    assert found is not None
    assert (found.manifest, found.version, found.live) == ("m2", 2, True)
    assert store.published_manifests() == {"m2"}
    store.set_publication(chat, None, None)
    gone = store.publication(chat)
    assert gone is not None
    assert gone.slug == slug
    assert not gone.live
    assert gone.to_dict()["version"] is None
    assert store.published_manifests() == set()


def test_an_unknown_slug_finds_nothing(store: Store) -> None:
    assert store.publication_by_slug("nosuchslug") is None


def test_deleting_the_chat_deletes_its_publication(store: Store) -> None:
    chat = chat_of(store)
    slug = store.reserve_slug(chat).slug
    store.set_publication(chat, "m1", 1)
    assert store.delete_chat(chat)
    assert store.publication_by_slug(slug) is None
