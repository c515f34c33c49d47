"""Ownership: a chat, run or sandbox of someone else is exactly like one that does not exist."""

from __future__ import annotations

import pytest

from app.api.errors import ApiError
from app.api.ownership import find_owned_sandbox, owned_chat, owned_run, owned_sandbox
from app.store import Store
from tests.api.harness import FakeSandboxes

pytestmark = pytest.mark.anyio


async def test_chats_and_runs(store: Store) -> None:
    ann, ben = store.create_user("ann"), store.create_user("ben")
    chat = store.create_chat(ann.id, "t")
    run = store.create_run(chat.id, ann.id, None, "replay", "todo-app")
    assert (await owned_chat(store, ann.id, chat.id)).id == chat.id
    assert (await owned_run(store, ann.id, run.id)).id == run.id
    errors = []
    for check, user, ident in (
        (owned_chat, ben.id, chat.id),
        (owned_chat, ann.id, "missing"),
        (owned_run, ben.id, run.id),
        (owned_run, ann.id, "missing"),
    ):
        with pytest.raises(ApiError) as caught:
            await check(store, user, ident)
        errors.append((caught.value.status, caught.value.code))
    assert errors == [(404, "not_found")] * 4


async def test_sandboxes_through_the_registry_or_the_chat(store: Store) -> None:
    ann, ben = store.create_user("ann"), store.create_user("ben")
    bound = store.create_chat(ann.id, "registry")
    stored = store.create_chat(ann.id, "store")
    sandboxes = FakeSandboxes()
    sandboxes.add("aaa111", bound.id)
    sandboxes.add("bbb222", chat="")
    store.set_chat_sandbox(stored.id, "bbb222")
    sandboxes.add("ccc333", chat="some-other-chat")
    found = [
        await find_owned_sandbox(store, sandboxes, user, ident)
        for user, ident in (
            (ann.id, "aaa111"),
            (ann.id, "bbb222"),
            (ben.id, "aaa111"),
            (ben.id, "bbb222"),
            (ann.id, "ccc333"),
            (ann.id, "unknown"),
        )
    ]
    assert [item.id if item else None for item in found] == [
        "aaa111",
        "bbb222",
        None,
        None,
        None,
        None,
    ]
    with pytest.raises(ApiError, match="no sandbox 'aaa111'"):
        await owned_sandbox(store, sandboxes, ben.id, "aaa111")
