"""A sandbox's preview errors in Redis: one capped stream per sandbox, with a TTL.

The preview proxy appends what a page reports (:mod:`sandbox.preview.error_ingest`); the API's
``GET /api/sandboxes/{id}/preview-errors`` follows it (SSE, ``Last-Event-ID`` = a stream id).
The stream keeps the newest ``max_len`` errors (about: ``MAXLEN ~``) and expires ``ttl``
seconds after the last append, so a hostile page costs bounded memory and a forgotten sandbox
nothing. Following polls ``XRANGE`` (never a blocking ``XREAD``: the service's Redis pool is
shared, and a blocked read would hold a connection per watching tab). Nothing here starts a
model turn: a stored error is only ever shown.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

import anyio
import redis.asyncio

from sandbox.env_settings import EnvReader
from sandbox.preview.error_reports import PreviewError
from sandbox.redis_boundary import wrap_redis_errors

DEFAULT_MAX_LEN = 500
DEFAULT_TTL_SECONDS = 24 * 3600
POLL_SECONDS = 0.5
READ_BATCH = 100
STREAM_ID = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")


def errors_key(sandbox_id: str) -> str:
    """The Redis stream of ``sandbox_id``'s preview errors."""
    return f"kiln:preview-errors:{sandbox_id}"


def valid_stream_id(value: str) -> str:
    """``value`` if it is a Redis stream id (``1712345678901-0``); else ValueError."""
    if not STREAM_ID.fullmatch(value):
        raise ValueError(f"not a preview error id: {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class ErrorStreamSettings:
    """How many errors a sandbox keeps, for how long, and how fast a page may report."""

    max_len: int = DEFAULT_MAX_LEN
    ttl_seconds: int = DEFAULT_TTL_SECONDS
    per_second: float = 20.0
    burst: int = 200

    @classmethod
    def from_env(cls, read: EnvReader | None = None) -> ErrorStreamSettings:
        """``KILN_PREVIEW_ERRORS_KEPT``, ``KILN_PREVIEW_ERRORS_PER_SECOND`` (README)."""
        read = read or EnvReader()
        defaults = cls()
        return cls(
            max_len=read.integer("KILN_PREVIEW_ERRORS_KEPT", defaults.max_len, low=10, high=10_000),
            per_second=read.number(
                "KILN_PREVIEW_ERRORS_PER_SECOND", defaults.per_second, low=0.1, high=1000.0
            ),
        )


class PreviewErrorStream:
    """Append to and follow the per-sandbox streams."""

    def __init__(
        self,
        client: redis.asyncio.Redis,
        settings: ErrorStreamSettings | None = None,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        """Store in ``client``; follow by polling every ``poll_seconds``."""
        self.client = client
        self.settings = settings or ErrorStreamSettings()
        self.poll_seconds = poll_seconds

    async def append(self, sandbox_id: str, errors: Iterable[PreviewError]) -> list[str]:
        """Store ``errors`` (in order); their stream ids."""
        entries = [json.dumps(error.to_dict(), ensure_ascii=False) for error in errors]
        if not entries:
            return []
        key = errors_key(sandbox_id)
        with wrap_redis_errors(f"storing preview errors of {sandbox_id!r}"):
            async with self.client.pipeline(transaction=True) as pipe:
                for entry in entries:
                    pipe.xadd(key, {"e": entry}, maxlen=self.settings.max_len, approximate=True)
                pipe.expire(key, self.settings.ttl_seconds)
                replies = await pipe.execute()
        return [as_text(reply) for reply in replies[:-1]]

    async def read(
        self, sandbox_id: str, after: str = "0-0", count: int = READ_BATCH
    ) -> list[tuple[str, dict[str, Any]]]:
        """Up to ``count`` errors stored after the id ``after``, oldest first."""
        with wrap_redis_errors(f"reading preview errors of {sandbox_id!r}"):
            rows = await self.client.xrange(
                errors_key(sandbox_id), min=f"({valid_stream_id(after)}", count=count
            )
        found: list[tuple[str, dict[str, Any]]] = []
        for stream_id, fields in rows or []:
            raw = (fields or {}).get(b"e", (fields or {}).get("e"))
            if stream_id is not None and raw is not None:
                found.append((as_text(stream_id), json.loads(as_text(raw))))
        return found

    async def follow(
        self, sandbox_id: str, after: str = "0-0"
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """The stored errors after ``after``, then each new one as it comes, for ever."""
        while True:
            batch = await self.read(sandbox_id, after)
            for stream_id, error in batch:
                yield stream_id, error
                after = stream_id
            if len(batch) < READ_BATCH:
                await anyio.sleep(self.poll_seconds)


def as_text(value: bytes | str) -> str:
    """A Redis reply as text, whether or not the client decodes responses."""
    return value.decode() if isinstance(value, bytes) else value
