"""Chats and messages."""

from __future__ import annotations

import pytest

from app.chat_images import ChatImage
from app.store import Store
from tests.image_samples import gif, png
from tests.store.conftest import raw_rows


def test_chats_are_listed_newest_first_per_user(store: Store) -> None:
    ann, bob = store.create_user("ann"), store.create_user("bob")
    first = store.create_chat(ann.id, "first")
    second = store.create_chat(ann.id, "second")
    store.create_chat(bob.id, "bob's")
    assert [chat.id for chat in store.list_chats(ann.id)] == [second.id, first.id]
    assert store.get_chat(first.id) == first
    assert store.get_chat("missing") is None


def test_a_chat_remembers_its_sandbox(store: Store) -> None:
    chat = store.create_chat(store.create_user("ann").id, "t")
    store.set_chat_sandbox(chat.id, "sbx1")
    stored = store.get_chat(chat.id)
    assert stored is not None
    assert stored.to_dict() == {
        "id": chat.id,
        "title": "t",
        "created": chat.created,
        "sandbox_id": "sbx1",
    }


def test_messages_keep_their_order_and_data(store: Store) -> None:
    chat = store.create_chat(store.create_user("ann").id, "t")
    asked = store.add_message(chat.id, "user", "make a todo app", None)
    answered = store.add_message(chat.id, "assistant", "done", {"files": ["src/App.jsx"]})
    assert store.list_messages(chat.id) == [asked, answered]
    assert answered.to_dict()["data"] == {"files": ["src/App.jsx"]}


def test_a_message_role_must_be_known(store: Store) -> None:
    chat = store.create_chat(store.create_user("ann").id, "t")
    with pytest.raises(ValueError, match="'system'"):
        store.add_message(chat.id, "system", "x", None)


def test_a_chat_is_created_under_a_chosen_id_and_renamed(store: Store) -> None:
    chat = store.create_chat(store.create_user("ann").id, "t", chat_id="chosen1")
    assert chat.id == "chosen1"
    renamed = store.rename_chat(chat.id, "better")
    assert renamed is not None
    assert renamed.title == "better"
    assert store.rename_chat("missing", "x") is None


def test_deleting_a_chat_removes_its_messages_runs_and_events(store: Store) -> None:
    ann = store.create_user("ann")
    chat, kept = store.create_chat(ann.id, "gone"), store.create_chat(ann.id, "kept")
    message = store.add_message(chat.id, "user", "hi", None)
    run = store.create_run(chat.id, ann.id, message.id, "replay", "todo-app")
    store.append_events(run.id, [{"type": "run_started"}])
    assert store.delete_chat(chat.id)
    assert store.get_chat(chat.id) is None
    assert store.list_messages(chat.id) == []
    assert store.get_run(run.id) is None
    assert store.list_chats(ann.id) == [kept]
    assert not store.delete_chat(chat.id)


def test_a_message_keeps_its_images_in_order_listed_with_it(store: Store) -> None:
    chat = store.create_chat(store.create_user("ann").id, "t")
    sent = (ChatImage("image/png", png()), ChatImage("image/gif", gif()))
    asked = store.add_message(chat.id, "user", "like this", None, sent)
    plain = store.add_message(chat.id, "assistant", "done")
    assert store.message_images(asked.id) == sent
    assert store.message_images(plain.id) == ()
    listed, answered = store.list_messages(chat.id)
    assert listed == asked
    assert [(i.media_type, i.size) for i in listed.images] == [
        ("image/png", len(sent[0].data)),
        ("image/gif", len(sent[1].data)),
    ]
    assert answered.images == ()
    assert listed.to_dict()["images"] == [image.to_dict() for image in listed.images]
    first = listed.images[0]
    assert store.chat_image(chat.id, first.id) == sent[0]


def test_an_image_is_found_only_through_its_own_chat_and_goes_with_it(store: Store) -> None:
    ann = store.create_user("ann")
    chat, other = store.create_chat(ann.id, "t"), store.create_chat(ann.id, "other")
    message = store.add_message(
        chat.id, "user", "like this", None, (ChatImage("image/png", png()),)
    )
    [image] = message.images
    assert store.chat_image(other.id, image.id) is None
    assert store.delete_chat(chat.id)
    assert store.chat_image(chat.id, image.id) is None
    assert raw_rows(store, "SELECT id FROM message_images") == []
