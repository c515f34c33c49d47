"""Run events numbered per run, and checkpoints."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

from app.store import Store
from tests.store.conftest import SECRET
from tests.store.test_runs import new_run

# One writer process: opens its own store, says "ready", waits for "go", appends BATCHES
# batches of two events to the run and prints the seqs it got.
BATCHES = 40
WRITER = """
import json, sys
from app.store import Store
store = Store(sys.argv[1], sys.argv[2])
print("ready", flush=True)
sys.stdin.readline()
seqs = []
for _ in range(int(sys.argv[4])):
    seqs += store.append_events(sys.argv[3], [{"type": "x"}, {"type": "y"}])
store.close()
print(json.dumps(seqs), flush=True)
"""


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


def test_two_processes_writing_one_run_at_once_never_share_or_skip_a_seq(
    store: Store, database_location: Path | str
) -> None:
    run = new_run(store)
    argv = [sys.executable, "-c", WRITER, str(database_location), SECRET, run.id, str(BATCHES)]
    writers = [
        subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for writer in writers:
        assert writer.stdout is not None
        assert writer.stdout.readline() == "ready\n"
    for writer in writers:  # both are connected: now they write at the same time
        assert writer.stdin is not None
        writer.stdin.write("go\n")
        writer.stdin.flush()
    outputs = [writer.communicate(timeout=120)[0] for writer in writers]
    assert [writer.returncode for writer in writers] == [0, 0]
    first, second = (json.loads(output) for output in outputs)
    assert len(first) == len(second) == 2 * BATCHES
    assert sorted(first + second) == list(range(1, 4 * BATCHES + 1))
    assert [seq for seq, _ in store.events_after(run.id)] == list(range(1, 4 * BATCHES + 1))


def test_a_checkpoint_is_replaced_by_the_next(store: Store) -> None:
    run = new_run(store)
    assert store.load_checkpoint(run.id) is None
    store.save_checkpoint(run.id, {"turn": 1})
    store.save_checkpoint(run.id, {"turn": 2, "files": {"a.js": "x"}})
    assert store.load_checkpoint(run.id) == {"turn": 2, "files": {"a.js": "x"}}
