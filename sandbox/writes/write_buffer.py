"""The Redis write buffer: each streamed file's whole content so far, and which files are dirty.

Keys of one sandbox (all under ``kiln:sandbox:<id>:`` and all with a TTL, refreshed on every
write and flush, so they expire once the sandbox is gone; :meth:`WriteBuffer.discard` deletes them
at once when the sandbox is destroyed)::

    content:<path>   string  the file's bytes so far (SETRANGE at the writer's offset: a
                             write repeated after a lost reply lands on the same bytes)
    versions         hash    path -> write counter, bumped by every write of that path
    dirty            set     paths written since their last flush
    files            set     every path of the run: what a fresh container must receive again
    open             set     paths started and not yet ended: flushed into :data:`STAGING`,
                             never at their place (the dev server and a version see only
                             whole files; a cancel leaves the file at its place as it was)
    container        string  id of the container the last flush wrote into
    lock             string  redis-py ``Lock`` that serializes flushes of this sandbox

A write is one ``MULTI`` pipeline (content, version, dirty mark, TTLs), so a snapshot read in its
own ``MULTI`` always sees a content together with the version that produced it. Clearing dirty
marks compares versions in a Lua script: a write that lands during a flush keeps its mark.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass

import redis.asyncio
import redis.exceptions
from redis.asyncio.lock import Lock

from sandbox.errors import SandboxUnavailable, WriteFailed
from sandbox.redis_boundary import wrap_redis_errors

KEY_PREFIX = "kiln:sandbox:"
# Where a file still streaming is written in the workspace: kiln's own folder, which versions
# leave out and no module imports; at ``file_end`` the whole file is written at its place.
STAGING = ".kiln/staging"

# KEYS: versions, dirty, container, then more keys whose TTL to refresh.
# ARGV: ttl_ms, container id, then path/version pairs of the flushed files.
_CLEAR_FLUSHED = """
local cleared = 0
for i = 3, #ARGV, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    redis.call('SREM', KEYS[2], ARGV[i])
    cleared = cleared + 1
  end
end
redis.call('SET', KEYS[3], ARGV[2])
for i = 1, #KEYS do
  redis.call('PEXPIRE', KEYS[i], ARGV[1])
end
return cleared
"""


def redis_errors(action: str) -> contextlib.AbstractContextManager[None]:
    """Redis failures while doing ``action``: an unreachable server as ``SandboxUnavailable``,
    anything else as ``WriteFailed``."""
    return wrap_redis_errors(action, unreachable=SandboxUnavailable, failed=WriteFailed)


def utf8(text: str) -> bytes:
    """The UTF-8 bytes of a file's text. A lone surrogate (a Python string may hold one, from a
    JSON escape like ``\\ud800`` in a model's stream; UTF-8 cannot) becomes U+FFFD, so one odd
    character never fails a whole file, let alone the run."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode()


@dataclass(frozen=True, slots=True)
class BufferedFile:
    """One file as a snapshot saw it: its content and the version that produced it."""

    path: str
    version: bytes
    content: bytes
    open: bool = False  # still streaming: written under :data:`STAGING`

    @property
    def target(self) -> str:
        """Where the flush writes it in the workspace."""
        return f"{STAGING}/{self.path}" if self.open else self.path


@dataclass(frozen=True, slots=True)
class BufferKeys:
    """The Redis key names of one sandbox's write buffer."""

    prefix: str

    @classmethod
    def for_sandbox(cls, sandbox_id: str) -> BufferKeys:
        """The keys of ``sandbox_id``."""
        return cls(f"{KEY_PREFIX}{sandbox_id}:")

    def content(self, path: str) -> str:
        """The key holding ``path``'s content."""
        return f"{self.prefix}content:{path}"

    @property
    def versions(self) -> str:
        """The hash of per-path write counters."""
        return f"{self.prefix}versions"

    @property
    def dirty(self) -> str:
        """The set of paths not flushed since their last write."""
        return f"{self.prefix}dirty"

    @property
    def files(self) -> str:
        """The set of every path of the run."""
        return f"{self.prefix}files"

    @property
    def open(self) -> str:
        """The set of paths started and not yet ended."""
        return f"{self.prefix}open"

    @property
    def container(self) -> str:
        """The id of the container the last flush wrote into."""
        return f"{self.prefix}container"

    @property
    def lock(self) -> str:
        """The flush lock's name."""
        return f"{self.prefix}lock"

    @property
    def shared(self) -> tuple[str, ...]:
        """The keys every write touches besides the file's own content."""
        return (self.versions, self.dirty, self.files, self.open)

    def pattern(self) -> str:
        """A SCAN pattern matching every key of this sandbox (glob characters escaped)."""
        return re.sub(r"([*?\[\]\\])", r"\\\1", self.prefix) + "*"


class WriteBuffer:
    """The Redis-held contents of one sandbox's files. Never calls Docker."""

    def __init__(self, client: redis.asyncio.Redis, sandbox_id: str, ttl_seconds: float) -> None:
        """Buffer for ``sandbox_id``; every key expires ``ttl_seconds`` after its last use."""
        self.client = client
        self.sandbox_id = sandbox_id
        self.keys = BufferKeys.for_sandbox(sandbox_id)
        self.ttl_ms = max(1, int(ttl_seconds * 1000))
        self._clear_flushed = client.register_script(_CLEAR_FLUSHED)

    async def start_file(self, path: str, *, publish: bool = True, open_: bool = False) -> None:
        """Reset ``path`` to empty. ``publish=False`` holds it back from flushes (config
        files); ``open_`` stages it until :meth:`close_file` (the file events' writer does)."""
        await self._write(path, b"", reset=True, publish=publish, open_=open_)

    async def append(self, path: str, chunk: str, *, publish: bool = True) -> None:
        """Append ``chunk`` to ``path`` and mark it dirty, in one pipeline."""
        await self._write(path, utf8(chunk), reset=False, publish=publish)

    async def write_at(
        self, pieces: Mapping[str, tuple[int, bytes]], held: Set[str] = frozenset()
    ) -> None:
        """Write each file's ``(offset, bytes)``, all in one pipeline (``held`` paths
        unpublished). Idempotent: repeated after a reply that never came (a cancel, a lost
        connection), it writes the same bytes at the same place."""
        where = f"buffering {len(pieces)} files of sandbox {self.sandbox_id!r}"
        with redis_errors(where):
            async with self.client.pipeline(transaction=True) as pipe:
                for path, (offset, data) in pieces.items():
                    self._queue_write(pipe, path, data, offset, path not in held)
                await pipe.execute()

    async def replace(self, path: str, content: bytes) -> None:
        """Set ``path``'s whole content (after a merge), close it and mark it dirty."""
        await self._write(path, content, reset=True, publish=True, open_=False)

    async def close_file(self, path: str, content: bytes | None = None) -> None:
        """``path`` is whole (``content`` replaces it if given): the next flush writes it at
        its place."""
        with redis_errors(f"closing {path!r} of sandbox {self.sandbox_id!r}"):
            async with self.client.pipeline(transaction=True) as pipe:
                if content is not None:
                    self._queue_write(pipe, path, content, None, True, open_=False)
                else:
                    self._queue_publish(pipe, path, open_=False)
                await pipe.execute()

    async def open_paths(self, paths: Sequence[str]) -> list[str]:
        """Which of ``paths`` are open (started, never ended)."""
        if not paths:
            return []
        with redis_errors(f"reading the open files of sandbox {self.sandbox_id!r}"):
            flags = await self.client.smismember(self.keys.open, list(paths))
        return [path for path, flag in zip(paths, flags, strict=True) if flag]

    async def _write(
        self, path: str, data: bytes, *, reset: bool, publish: bool, open_: bool | None = None
    ) -> None:
        with redis_errors(f"buffering {path!r} of sandbox {self.sandbox_id!r}"):
            async with self.client.pipeline(transaction=True) as pipe:
                offset = None if reset else -1
                self._queue_write(pipe, path, data, offset, publish, open_=open_)
                await pipe.execute()

    def _queue_write(
        self,
        pipe: redis.asyncio.client.Pipeline,
        path: str,
        data: bytes,
        offset: int | None,
        publish: bool,
        open_: bool | None = None,
    ) -> None:
        """Queue one file's write (``offset``: ``None`` resets the file, -1 appends, else
        SETRANGE) and, published, its version, dirty mark, open flag and TTLs."""
        key = self.keys.content(path)
        if offset is None:
            pipe.set(key, data, px=self.ttl_ms)
        else:
            if offset < 0:
                pipe.append(key, data)
            elif data:
                pipe.setrange(key, offset, data)
            pipe.pexpire(key, self.ttl_ms)
        if publish:
            self._queue_publish(pipe, path, open_)
        elif open_ is not None:
            (pipe.sadd if open_ else pipe.srem)(self.keys.open, path)

    def _queue_publish(
        self, pipe: redis.asyncio.client.Pipeline, path: str, open_: bool | None
    ) -> None:
        """Queue a new version of ``path``, its dirty mark, its open flag and the TTLs."""
        pipe.hincrby(self.keys.versions, path, 1)
        pipe.sadd(self.keys.dirty, path)
        pipe.sadd(self.keys.files, path)
        if open_ is not None:
            (pipe.sadd if open_ else pipe.srem)(self.keys.open, path)
        for shared in self.keys.shared:
            pipe.pexpire(shared, self.ttl_ms)

    async def read(self, path: str) -> bytes | None:
        """The buffered content of ``path``, or ``None`` if there is none."""
        with redis_errors(f"reading {path!r} of sandbox {self.sandbox_id!r}"):
            value = await self.client.get(self.keys.content(path))
        return None if value is None else _as_bytes(value)

    async def forget(self, path: str) -> None:
        """Drop a held-back file's content (a refused config file)."""
        with redis_errors(f"dropping {path!r} of sandbox {self.sandbox_id!r}"):
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.delete(self.keys.content(path))
                pipe.srem(self.keys.open, path)
                await pipe.execute()

    async def dirty_files(self) -> list[BufferedFile]:
        """Every dirty file with its content and version, read consistently."""
        return await self._snapshot(self.keys.dirty)

    async def all_files(self) -> list[BufferedFile]:
        """Every file of the run, for a container that must receive them all again."""
        return await self._snapshot(self.keys.files)

    async def _snapshot(self, set_key: str) -> list[BufferedFile]:
        with redis_errors(f"reading the buffered files of sandbox {self.sandbox_id!r}"):
            members = await self.client.smembers(set_key)
            paths = sorted(_as_bytes(member).decode() for member in members)
            if not paths:
                return []
            async with self.client.pipeline(transaction=True) as pipe:
                for path in paths:
                    pipe.hget(self.keys.versions, path)
                    pipe.get(self.keys.content(path))
                    pipe.sismember(self.keys.open, path)
                values = await pipe.execute()
        snapshot = []
        for index, path in enumerate(paths):
            version, content, open_ = values[3 * index : 3 * index + 3]
            if content is not None:  # an expired content key cannot be restored; never blank it
                stamp = _as_bytes(version or b"0")
                snapshot.append(BufferedFile(path, stamp, _as_bytes(content), bool(open_)))
        return snapshot

    async def clear_flushed(self, flushed: Sequence[BufferedFile], container_id: str) -> int:
        """Clear the dirty mark of each flushed file not written again since; returns how many.

        Also records ``container_id`` as the holder of the flushed files and refreshes TTLs.
        """
        refresh = [self.keys.content(f.path) for f in flushed]
        keys = [
            self.keys.versions,
            self.keys.dirty,
            self.keys.container,
            self.keys.files,
            self.keys.open,
        ]
        args: list[str | bytes | int] = [self.ttl_ms, container_id]
        for buffered in flushed:
            args += [buffered.path, buffered.version]
        with redis_errors(f"clearing dirty marks of sandbox {self.sandbox_id!r}"):
            cleared = await self._clear_flushed(keys=[*keys, *refresh], args=args)
        return int(cleared)

    async def last_container(self) -> str | None:
        """The id of the container the last flush wrote into, if any."""
        with redis_errors(f"reading the container of sandbox {self.sandbox_id!r}"):
            value = await self.client.get(self.keys.container)
        return None if value is None else _as_bytes(value).decode()

    def lock(self, timeout: float, blocking_timeout: float) -> Lock:
        """The sandbox's flush lock (auto-released after ``timeout`` if its holder dies)."""
        return self.client.lock(
            self.keys.lock,
            timeout=timeout,
            sleep=0.01,
            blocking_timeout=blocking_timeout,
            thread_local=False,  # tasks share the thread; each flush makes its own Lock anyway
        )

    async def discard(self) -> int:
        """Delete every key of this sandbox (on destroy); returns how many were deleted."""
        with redis_errors(f"discarding the write buffer of sandbox {self.sandbox_id!r}"):
            doomed = [key async for key in self.client.scan_iter(match=self.keys.pattern())]
            if not doomed:
                return 0
            return int(await self.client.delete(*doomed))


def _as_bytes(value: bytes | str) -> bytes:
    """A reply as bytes, whether or not the client was made with ``decode_responses``."""
    return value if isinstance(value, bytes) else value.encode()


async def discard_sandbox_writes(client: redis.asyncio.Redis, sandbox_id: str) -> int:
    """Delete every write-buffer key of ``sandbox_id``; for the manager's destroy path."""
    return await WriteBuffer(client, sandbox_id, ttl_seconds=1).discard()
