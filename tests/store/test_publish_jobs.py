"""app/store/publish_jobs.py: one running job per chat (the UNIQUE ``active``), how jobs end,
a dead job ended, the user's jobs of the hour; on SQLite and Postgres."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from app.store import Store
from app.store.publish_jobs import StartWindow


def chat_of(store: Store, name: str = "ann") -> tuple[str, str]:
    user = store.create_user(name)
    return user.id, store.create_chat(user.id, "site").id


def test_a_chat_runs_one_job_at_a_time(store: Store) -> None:
    user, chat = chat_of(store)
    first = store.start_publish_job("j1", chat, user, 1, "queued")
    assert first is not None
    assert (first.stage, first.active, first.code) == ("queued", True, None)
    assert store.start_publish_job("j2", chat, user, 2, "queued") is None
    _, other = chat_of(store, "bo")
    assert store.start_publish_job("j3", other, user, 1, "queued") is not None  # another chat
    store.set_publish_stage("j1", "building")
    store.end_publish_job("j1", "live")
    ended = store.publish_job("j1")
    assert ended is not None
    assert (ended.stage, ended.active) == ("live", False)
    store.set_publish_stage("j1", "building")  # an ended job does not move again
    assert store.publish_job("j1") == ended
    second = store.start_publish_job("j4", chat, user, 2, "queued")
    assert second is not None
    assert store.latest_publish_job(chat) == second


def test_a_failed_job_keeps_its_words_and_a_dead_one_is_ended(store: Store) -> None:
    user, chat = chat_of(store)
    store.start_publish_job("j1", chat, user, 1, "queued")
    store.end_publish_job("j1", "failed", "publish_build_failed", "npm run build exited with 1")
    failed = store.publish_job("j1")
    assert failed is not None
    assert (failed.code, failed.message) == ("publish_build_failed", "npm run build exited with 1")
    store.start_publish_job("j2", chat, user, 1, "building")
    assert store.end_stale_publish_jobs(chat, time.time() - 60, "failed", "x", "y") == 0  # moving
    assert store.end_stale_publish_jobs(chat, time.time() + 1, "failed", "gone", "died") == 1
    dead = store.latest_publish_job(chat)
    assert dead is not None
    assert (dead.id, dead.active, dead.code, dead.message) == ("j2", False, "gone", "died")


def test_the_jobs_a_user_started_since(store: Store) -> None:
    user, chat = chat_of(store)
    before = time.time()
    for number in range(3):
        store.start_publish_job(f"j{number}", chat, user, 1, "queued")
        store.end_publish_job(f"j{number}", "failed", "publish_failed", "no")
    started = store.publish_jobs_started_since(user, before - 1)
    assert len(started) == 3
    assert started == sorted(started)
    assert store.publish_jobs_started_since(user, time.time() + 1) == []
    assert store.publish_jobs_started_since("someone-else", 0) == []


def test_a_full_window_refuses_with_the_starts_in_it(store: Store) -> None:
    user, chat = chat_of(store)
    window = StartWindow(time.time() - 1, 2)
    for number in range(2):
        assert store.start_publish_job(f"j{number}", chat, user, 1, "queued", window) is not None
        store.end_publish_job(f"j{number}", "failed", "publish_failed", "no")
    refused = store.start_publish_job("j9", chat, user, 1, "queued", window)
    assert isinstance(refused, list)
    assert len(refused) == 2
    assert store.publish_job("j9") is None


def test_starts_at_once_never_pass_the_window(store: Store) -> None:
    # Ten requests of one user at the same instant, on ten chats, against a limit of three:
    # counted and inserted apart, several passed the last start.
    user = store.create_user("eve").id
    chats = [store.create_chat(user, f"site {n}").id for n in range(10)]
    window = StartWindow(time.time() - 1, 3)

    def start(number: int) -> object:
        return store.start_publish_job(f"j{number}", chats[number], user, 1, "queued", window)

    with ThreadPoolExecutor(max_workers=10) as pool:
        outcomes = list(pool.map(start, range(10)))
    started = [outcome for outcome in outcomes if not isinstance(outcome, list)]
    assert len(started) == 3, outcomes
    assert len(store.publish_jobs_started_since(user, 0)) == 3
