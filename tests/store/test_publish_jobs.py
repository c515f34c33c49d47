"""app/store/publish_jobs.py: one running job per chat (the UNIQUE ``active``), how jobs end,
a dead job ended, the user's jobs of the hour; on SQLite and Postgres."""

from __future__ import annotations

import time

from app.store import Store


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
