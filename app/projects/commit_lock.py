"""Who may write a chat's project now: one writer per chat, on one host or on many.

The lock only spares writers wasted work; it is not what keeps versions safe. A writer can
hold a lock it has lost (paused past its time to live: a stopped VM, a long GC, a frozen
container), so :class:`app.projects.git_store.GitProjectStore` moves the branch with a
compare-and-swap (``git update-ref <branch> <new> <old>``) under either lock, and a writer whose
base moved records again on the new tip. Two kinds, one rule (:func:`commit_lock`):

- :class:`RedisCommitLock` when the process has Redis (``kiln serve``, ``kiln worker``, a CLI
  given ``REDIS_URL``): a key per chat holding a random token, set only if absent, with a time
  to live renewed by a thread while the commit runs; released only by its holder's token (a
  Lua compare-and-delete), so a writer whose lock expired never frees the next holder's.
  Writers on any host that share the Redis (and the projects folder) take turns.
- :class:`FileCommitLock` otherwise (the embedded CLI without Redis): ``flock`` on a file in the
  repository, one host only. It is never relied on across hosts (NFS may not honour it); what
  git itself relies on there (a lock file made with ``O_CREAT|O_EXCL``, then a ``rename``) NFS
  v3 and later and EFS do honour.
"""

from __future__ import annotations

import fcntl
import logging
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Protocol

import redis

from app.data_dir import create_private_file
from app.projects.errors import ProjectError
from sandbox import wrap_redis_errors

log = logging.getLogger(__name__)

LOCK_TTL_SECONDS = 30.0  # a writer that stops renewing frees the chat this long after
LOCK_WAIT_SECONDS = 150.0  # longer than a commit's git commands may take (120 s)
POLL_SECONDS = (0.005, 0.05)  # the first and the longest pause between tries to take it

# Renew or release only while the key still holds our token (another writer's is not ours).
OURS = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call({}) else return 0 end"
RENEW = OURS.format("'pexpire', KEYS[1], ARGV[2]")
RELEASE = OURS.format("'del', KEYS[1]")


class CommitLock(Protocol):
    """Held while one writer records a version of a chat's project."""

    def held(self, chat: str, repo: Path) -> AbstractContextManager[None]:
        """Wait for the chat's lock (``repo`` is its repository), hold it, release it."""
        ...


def commit_lock(client: redis.Redis | None) -> CommitLock:
    """The one rule: the Redis lock when the process has Redis, else the local file lock."""
    return FileCommitLock() if client is None else RedisCommitLock(client)


class FileCommitLock:
    """``flock`` on ``<repo>/kiln.lock``: the writers of one host take turns."""

    @contextmanager
    def held(self, chat: str, repo: Path) -> Iterator[None]:
        """Hold the repository's lock file (see :class:`CommitLock`)."""
        lock = repo / "kiln.lock"
        create_private_file(lock)
        with open(lock, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


class RedisCommitLock:
    """A per-chat Redis key with a token and a time to live (see the module docstring)."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        ttl_seconds: float = LOCK_TTL_SECONDS,
        wait_seconds: float = LOCK_WAIT_SECONDS,
    ) -> None:
        self.client = client
        self.ttl_ms = max(1, round(ttl_seconds * 1000))
        self.wait_seconds = wait_seconds

    @staticmethod
    def key(chat: str) -> str:
        """The chat's lock key."""
        return f"kiln:project-lock:{chat}"

    @contextmanager
    def held(self, chat: str, repo: Path) -> Iterator[None]:
        """Take the chat's key (waiting up to ``wait_seconds``), renew it while the block
        runs, then delete it if it is still ours."""
        key, token = self.key(chat), secrets.token_hex(16)
        self._take(chat, key, token)
        done = threading.Event()
        renewer = threading.Thread(
            target=self._renew, args=(chat, key, token, done), name=f"lock-{chat}", daemon=True
        )
        renewer.start()
        try:
            yield
        finally:
            done.set()
            renewer.join()
            self._release(chat, key, token)

    def _release(self, chat: str, key: str, token: str) -> None:
        """Delete ``key`` if it still holds ``token``. A failure is logged, not raised: the
        commit's outcome stands (raised here it would hide it), and the key expires anyway."""
        try:
            with _redis_errors("releasing", chat):
                self.client.eval(RELEASE, 1, key, token)
        except ProjectError as exc:
            log.warning("project lock not released (it expires by itself): %s", exc)

    def _take(self, chat: str, key: str, token: str) -> None:
        """Set ``key`` to ``token`` once it is free; :class:`ProjectError` after the wait."""
        deadline = time.monotonic() + self.wait_seconds
        pause = POLL_SECONDS[0]
        while True:
            with _redis_errors("taking", chat):
                if self.client.set(key, token, nx=True, px=self.ttl_ms):
                    return
            if time.monotonic() + pause > deadline:
                raise ProjectError(
                    f"the project of chat {chat!r} is busy: another writer held it for "
                    f"{self.wait_seconds:g} s; nothing was recorded"
                )
            time.sleep(pause)  # a thread of the caller's (the store's methods block)
            pause = min(pause * 2, POLL_SECONDS[1])

    def _renew(self, chat: str, key: str, token: str, done: threading.Event) -> None:
        """Push the key's expiry back every third of its life until ``done``; stop (with a
        warning) once it is no longer ours: the commit's compare-and-swap still decides."""
        while not done.wait(self.ttl_ms / 3000):
            try:
                with _redis_errors("renewing", chat):
                    ours = self.client.eval(RENEW, 1, key, token, str(self.ttl_ms))
            except ProjectError as exc:
                log.warning("project lock not renewed: %s", exc, extra={"chat": chat})
                continue
            if not ours:
                log.warning("chat %r: project lock expired mid-commit", chat, extra={"chat": chat})
                return


def _redis_errors(doing: str, chat: str) -> AbstractContextManager[None]:
    """Redis failures while ``doing`` the chat's lock, as :class:`ProjectError` in words."""
    return wrap_redis_errors(f"{doing} the project lock of chat {chat!r}", unreachable=ProjectError)
