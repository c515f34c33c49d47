"""File events -> the write buffer: stream bodies into Redis, clean up and flush at ``file_end``.

Ordinary files are published as they stream (the flush scheduler writes them into the sandbox
while the model is still typing), but into kiln's staging folder (``.kiln/staging/<path>``), not
at their place: a file is *open* from ``file_start`` to ``file_end``, and only ``file_end``
closes it, so the next flush writes the whole file at its place. The dev server and a recorded
version never see half a file, and a run cancelled (or a worker killed) mid-file leaves that
file at its place as it was: :meth:`FileEventWriter.roll_back` says which files that was.
Chunks are gathered in memory and reach Redis together, in one pipeline per flush
(:meth:`FileEventWriter.push`, which the scheduler calls before each flush), not one
transaction per chunk: a file's content is whole in Redis whenever a flush reads it. Each push
writes its bytes at the offset the writer knows the file has reached, never appends, and one
push runs at a time: a push that is repeated because its reply never came (a cancel, a lost
connection: Redis may have applied it) writes the same bytes at the same place again.
A template's config files are held back until ``file_end``,
because :func:`sandbox.writes.template_files.decide_write` needs the whole content:
``package.json`` is merged (its new dependencies are reported so the caller can install them), any
other config file is refused, and both come back as notices the user must see.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

from sandbox.images.templates import Template
from sandbox.writes.fences import strip_wrapping_fence
from sandbox.writes.flush import FlushScheduler
from sandbox.writes.template_files import (
    PACKAGE_JSON,
    WriteAction,
    decide_write,
    is_template_config,
)
from sandbox.writes.write_buffer import WriteBuffer, utf8

# Reads a file of the sandbox's workspace as it is now (``None`` if there is none).
WorkspaceReader = Callable[[str], Awaitable[str | None]]


@dataclass(frozen=True, slots=True)
class WriteNotice:
    """Something about a written file the user should see; ``packages`` need installing."""

    path: str
    code: str  # config_merged | config_refused
    message: str
    packages: tuple[str, ...] = ()


class FileEventWriter:
    """Handles ``file_start`` / ``file_content`` / ``file_end`` of one sandbox."""

    def __init__(
        self,
        buffer: WriteBuffer,
        scheduler: FlushScheduler,
        template: Template,
        read_workspace: WorkspaceReader,
    ) -> None:
        """Write into ``buffer`` and tell ``scheduler``; ``read_workspace`` serves merges."""
        self.buffer = buffer
        self.scheduler = scheduler
        self.template = template
        self._read_workspace = read_workspace
        self._held: set[str] = set()
        self._pending: dict[str, list[str]] = {}  # chunks not yet in the buffer, per path
        self._offsets: dict[str, int] = {}  # bytes of each file the buffer holds for sure
        self._open: list[str] = []  # started, not yet ended, in start order
        self._lock = anyio.Lock()  # one push (or start, or end) at a time, in order
        self.completed: list[str] = []  # paths written in full, in first-completion order

    @property
    def has_open_files(self) -> bool:
        """Whether a file was started and not yet ended (the sandbox holds its old content)."""
        return bool(self._open)

    async def start(self, path: str) -> None:
        """A file begins: reset its content (held back if it is a template config file)."""
        publish = not is_template_config(self.template, path)
        async with self._lock:
            self._pending.pop(path, None)  # chunks of the file's previous start are void
            self._offsets[path] = 0
            if path not in self._open:
                self._open.append(path)
            if not publish:
                self._held.add(path)
            await self.buffer.start_file(path, publish=publish, open_=True)
        if publish:
            self.scheduler.note_write()

    async def append(self, path: str, chunk: str) -> None:
        """Append a piece of the file's body (gathered until the next :meth:`push`)."""
        self._pending.setdefault(path, []).append(chunk)
        if path not in self._held:
            self.scheduler.note_write()

    async def push(self) -> None:
        """Move every gathered chunk into the buffer, all files in one pipeline.

        On a failure (a Redis error, a cancel) the chunks are kept, in order, for the next push,
        which writes them at the same offsets (see the module docstring): nothing is lost and
        nothing is written twice.
        """
        async with self._lock:
            await self._push()

    async def _push(self) -> None:
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        data = {path: utf8("".join(chunks)) for path, chunks in pending.items()}
        pieces = {path: (self._offsets.get(path, 0), body) for path, body in data.items()}
        try:
            await self.buffer.write_at(pieces, held=self._held)
        except BaseException:
            for path, chunks in self._pending.items():
                pending.setdefault(path, []).extend(chunks)
            self._pending = pending
            raise
        for path, body in data.items():
            self._offsets[path] = self._offsets.get(path, 0) + len(body)

    async def read(self, path: str) -> bytes | None:
        """``path``'s buffered content, every chunk so far included."""
        await self.push()
        return await self.buffer.read(path)

    async def end(self, path: str) -> list[WriteNotice]:
        """The file is complete: clean it up (or decide on a config file), close it and flush
        it now."""
        async with self._lock:
            await self._push()
            if path in self._held:
                self._held.discard(path)
                notices = await self._end_config(path)
            else:
                content = await self.buffer.read(path)
                cleaned = None
                if content is not None:
                    text = content.decode()
                    stripped = strip_wrapping_fence(text)
                    cleaned = utf8(stripped) if stripped != text else None
                await self.buffer.close_file(path, cleaned)
                self.scheduler.note_write()
                self._complete(path)
                notices = []
            if path in self._open:
                self._open.remove(path)
        return notices

    async def abandon(self) -> None:
        """Drop config files whose ``file_end`` never came (the stream was cut)."""
        for path in sorted(self._held):
            self._pending.pop(path, None)
            await self.buffer.forget(path)
        self._held.clear()
        await self.push()

    async def roll_back(self) -> list[str]:
        """A cancelled run: the files it started and never ended, which stay at their place as
        they were (a config file held back is dropped; the others stay open, in staging). A
        file whose end Redis took though its reply was cut is completed instead."""
        async with self._lock:
            started, self._open = self._open, []
            held = set(self._held)
            # An end whose reply never came may have closed its file: Redis knows. Such a file
            # is whole: it is completed here, and flushed like any.
            still_open = set(await self.buffer.open_paths([p for p in started if p not in held]))
            for path in started:
                if path not in held and path not in still_open:
                    self._complete(path)
                    self.scheduler.note_write()
        await self.abandon()
        return [path for path in started if path in held or path in still_open]

    async def _end_config(self, path: str) -> list[WriteNotice]:
        content = (await self.buffer.read(path) or b"").decode()
        content = strip_wrapping_fence(content)
        current = await self._read_workspace(PACKAGE_JSON) if path == PACKAGE_JSON else None
        decision = decide_write(self.template, path, content, current)
        if decision.action is WriteAction.REFUSE or decision.content is None:
            await self.buffer.forget(path)
        else:
            await self.buffer.replace(decision.path, utf8(decision.content))
            self.scheduler.note_write()
            self._complete(decision.path)
        code = "config_refused" if decision.action is WriteAction.REFUSE else "config_merged"
        message = _describe(decision.added, decision.warnings)
        return [WriteNotice(path, code, message, decision.added)]

    def _complete(self, path: str) -> None:
        if path not in self.completed:
            self.completed.append(path)
        self.scheduler.request_now()


def _describe(added: tuple[str, ...], warnings: tuple[str, ...]) -> str:
    """One message for a config-file decision: what was added, then every warning."""
    parts = [f"added {', '.join(added)} to package.json"] if added else []
    parts += warnings
    return "; ".join(parts) or "package.json brought no new dependencies"
