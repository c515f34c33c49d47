"""Run events numbered per run, and checkpoints."""

from __future__ import annotations

import threading

from app.store import Store
from tests.store.test_runs import new_run


def test_events_are_numbered_from_one_per_run(store: Store) -> None:
    first, second = new_run(store), new_run(store)
    assert store.append_events(first.id, [{"type": "a"}, {"type": "b"}]) == [1, 2]
    assert store.append_events(second.id, [{"type": "a"}]) == [1]
    assert store.append_events(first.id, [{"type": "c"}]) == [3]
    assert store.append_events(first.id, []) == []
    assert store.last_seq(first.id) == 3
    assert store.last_seq("missing") == 0


def test_events_after_pages_in_order(store: Store) -> None:
    run = new_run(store)
    store.append_events(run.id, [{"type": "text", "content": str(i)} for i in range(10)])
    page = store.events_after(run.id, 3, limit=4)
    assert [seq for seq, _ in page] == [4, 5, 6, 7]
    assert page[0][1] == {"type": "text", "content": "3"}
    assert store.events_after(run.id, 10) == []
    assert [seq for seq, _ in store.events_of_type(run.id, "text")] == list(range(1, 11))


def test_concurrent_writers_never_share_a_seq(store: Store) -> None:
    run = new_run(store)
    seqs: list[int] = []

    def write() -> None:
        for _ in range(10):
            seqs.extend(store.append_events(run.id, [{"type": "x"}, {"type": "y"}]))

    threads = [threading.Thread(target=write) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(seqs) == list(range(1, 101))


def test_a_checkpoint_is_replaced_by_the_next(store: Store) -> None:
    run = new_run(store)
    assert store.load_checkpoint(run.id) is None
    store.save_checkpoint(run.id, {"turn": 1})
    store.save_checkpoint(run.id, {"turn": 2, "files": {"a.js": "x"}})
    assert store.load_checkpoint(run.id) == {"turn": 2, "files": {"a.js": "x"}}
