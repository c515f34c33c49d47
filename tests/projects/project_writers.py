"""A writer of one chat's project in a process of its own, as a kiln on another host would be.

``python -m tests.projects.project_writers ROOT CHAT NAME COUNT [REDIS_URL [TTL]]`` prints
``ready``, waits for a line on stdin (so that writers start together), then commits ``COUNT``
versions (:func:`files_of`) through a :class:`GitProjectStore` on ``ROOT`` (locked in Redis when
a URL is given, else by the local lock file) and prints one JSON line: the version numbers it
got and the warnings the store logged. A ``COUNT`` of 0 commits once and stops its own process
(SIGSTOP) in the middle of that commit, after it took the lock and read the tip: a writer paused
past its lock's time to live.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import redis

from app.projects.commit_lock import CommitLock, FileCommitLock, RedisCommitLock
from app.projects.git_store import GitProjectStore
from app.projects.store import VersionInfo


def files_of(name: str, turn: int) -> dict[str, bytes]:
    """What writer ``name`` records at ``turn``: a file of its own and one both change."""
    return {f"{name}.txt": b"%d\n" % turn, "shared.txt": f"{name} {turn}\n".encode()}


class PausingFiles(Mapping[str, bytes]):
    """``files``, but the first content read (while the commit compares it with the tip)
    stops this process until it is sent SIGCONT."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.paused = False

    def __getitem__(self, path: str) -> bytes:
        if not self.paused:
            self.paused = True
            os.kill(os.getpid(), signal.SIGSTOP)
        return self.files[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)


class Warnings(logging.Handler):
    """The store's warnings, kept to be printed."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def main(argv: list[str]) -> None:
    root, chat, name, count = Path(argv[0]), argv[1], argv[2], int(argv[3])
    lock: CommitLock = FileCommitLock()
    if len(argv) > 4:
        ttl = float(argv[5]) if len(argv) > 5 else 30.0
        lock = RedisCommitLock(redis.Redis.from_url(argv[4]), ttl_seconds=ttl)
    store = GitProjectStore(root, lock)
    warnings = Warnings()
    logging.getLogger("app.projects").addHandler(warnings)
    print("ready", flush=True)
    sys.stdin.readline()
    numbers = []
    if count == 0:
        version = store.commit(chat, PausingFiles(files_of(name, 1)), VersionInfo(name, 1))
        numbers.append(version.number if version else 0)
    for turn in range(1, count + 1):
        version = store.commit(chat, files_of(name, turn), VersionInfo(name, turn))
        numbers.append(version.number if version else 0)
    print(json.dumps({"numbers": numbers, "warnings": warnings.messages}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
