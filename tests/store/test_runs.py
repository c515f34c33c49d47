"""Runs: queued, claimed once, finished once, with the reply in the same step."""

from __future__ import annotations

import threading

import pytest

from app.store import CANCELLED, COMPLETED, FAILED, QUEUED, RUNNING, Run, Store


def new_run(store: Store, name: str = "ann") -> Run:
    user = store.user_by_name(name) or store.create_user(name)
    chat = store.create_chat(user.id, "t")
    message = store.add_message(chat.id, "user", "make an app", None)
    return store.create_run(chat.id, user.id, message.id, "replay", "todo-app")


def test_a_new_run_is_queued(store: Store) -> None:
    run = new_run(store)
    assert run.status == QUEUED
    assert store.get_run(run.id) == run
    assert run.to_dict() == {
        "id": run.id,
        "chat_id": run.chat_id,
        "status": "queued",
        "stop_reason": None,
        "turns": 0,
        "usage": {},
        "sandbox_id": None,
        "preview_url": None,
        "error": None,
        "created": run.created,
        "started": None,
        "finished": None,
    }


def test_a_run_can_be_created_with_a_reserved_id(store: Store) -> None:
    run = new_run(store)
    again = store.create_run(run.chat_id, run.user_id, None, None, None, run_id="reserved1")
    assert again.id == "reserved1"
    assert store.get_run("reserved1") is not None


def test_only_one_of_many_concurrent_claims_wins(store: Store) -> None:
    run = new_run(store)
    results: list[bool] = []
    threads = [
        threading.Thread(target=lambda i=i: results.append(store.claim_run(run.id, f"w{i}")))
        for i in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(True) == 1
    claimed = store.get_run(run.id)
    assert claimed is not None
    assert (claimed.status, claimed.attempts) == (RUNNING, 1)
    assert claimed.started is not None


def test_a_takeover_moves_a_running_run_to_the_new_worker(store: Store) -> None:
    run = new_run(store)
    assert store.claim_run(run.id, "w1")
    assert not store.claim_run(run.id, "w2")
    assert store.claim_run(run.id, "w2", takeover=True)
    taken = store.get_run(run.id)
    assert taken is not None
    assert (taken.worker, taken.attempts) == ("w2", 2)
    assert not store.finish_run(run.id, COMPLETED, "done", worker="w1")
    assert store.finish_run(run.id, COMPLETED, "done", worker="w2")


def test_finishing_stores_the_reply_in_the_same_step_once(store: Store) -> None:
    run = new_run(store)
    store.claim_run(run.id, "w1")
    reply = ("Here it is.", {"files": ["a.js"]})
    assert store.finish_run(run.id, COMPLETED, "code_written", worker="w1", reply=reply, turns=1)
    assert not store.finish_run(run.id, FAILED, "error", reply=("again", {}))
    finished = store.get_run(run.id)
    assert finished is not None
    assert (finished.status, finished.stop_reason, finished.turns) == (COMPLETED, "code_written", 1)
    messages = store.list_messages(run.chat_id)
    assert [(m.role, m.content) for m in messages] == [
        ("user", "make an app"),
        ("assistant", "Here it is."),
    ]
    assert finished.reply_id == messages[1].id


def test_finish_respects_the_expected_status(store: Store) -> None:
    run = new_run(store)
    store.claim_run(run.id, "w1")
    assert not store.finish_run(run.id, CANCELLED, "cancelled", from_statuses=(QUEUED,))
    assert store.finish_run(run.id, CANCELLED, "cancelled", from_statuses=(RUNNING,))


def test_update_run_sets_fields_but_not_the_status(store: Store) -> None:
    run = new_run(store)
    updated = store.update_run(run.id, usage={"input_tokens": 5}, sandbox_id="s1", turns=2)
    assert updated is not None
    assert (updated.usage, updated.sandbox_id, updated.turns) == ({"input_tokens": 5}, "s1", 2)
    with pytest.raises(ValueError, match="status"):
        store.update_run(run.id, status=COMPLETED)


def test_a_cancel_request_marks_only_an_active_run(store: Store) -> None:
    active, ended = new_run(store), new_run(store)
    store.finish_run(ended.id, FAILED, "error")
    marked = store.request_cancel(active.id)
    assert marked is not None
    assert marked.cancel_requested
    unmarked = store.request_cancel(ended.id)
    assert unmarked is not None
    assert not unmarked.cancel_requested
    assert store.request_cancel("missing") is None


def test_active_runs_filter_by_user_and_chat(store: Store) -> None:
    first, second, other = new_run(store), new_run(store), new_run(store, "bob")
    store.finish_run(second.id, COMPLETED, "done")
    assert [r.id for r in store.active_runs()] == [first.id, other.id]
    assert [r.id for r in store.active_runs(user_id=first.user_id)] == [first.id]
    assert [r.id for r in store.active_runs(chat_id=other.chat_id)] == [other.id]
    assert [r.id for r in store.list_runs(second.chat_id)] == [second.id]


def test_a_run_cannot_end_in_a_non_terminal_status(store: Store) -> None:
    with pytest.raises(ValueError, match="'running'"):
        store.finish_run(new_run(store).id, RUNNING, None)
