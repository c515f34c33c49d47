"""Where sandboxes are recorded: one Redis hash per sandbox, a chat -> sandbox binding, an index.

Docker labels are fixed when a container is created, but a warm-pool sandbox only gets its chat
and owner when it is handed out, and its last use changes all the time; both live here, shared
by every process of one kiln instance. Keys (``{p}`` is ``kiln:registry:{instance}``)::

    {p}:ids            set of sandbox ids
    {p}:rec:{id}       hash: the fields of SandboxRecord
    {p}:chat:{chat}    the id of the chat's sandbox (set only if absent: first claim wins)

Redis errors are wrapped into :class:`~sandbox.errors.SandboxUnavailable` here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import redis.asyncio
import redis.exceptions

from sandbox.handle import Sandbox
from sandbox.images.templates import get_template
from sandbox.redis_boundary import wrap_redis_errors

# Update fields of an existing record only: a late touch must not resurrect a destroyed one.
_UPDATE_IF_EXISTS = """
if redis.call('exists', KEYS[1]) == 1 then
  return redis.call('hset', KEYS[1], unpack(ARGV))
end
return -1
"""
# Save a record unless the instance already holds ARGV[2] sandboxes (a known id always saves):
# the count and the save in one step, so processes provisioning at once never exceed it.
_SAVE_WITHIN = """
if redis.call('sismember', KEYS[1], ARGV[1]) == 0 then
  local held = redis.call('scard', KEYS[1])
  if held >= tonumber(ARGV[2]) then return held end
end
redis.call('del', KEYS[2])
redis.call('hset', KEYS[2], unpack(ARGV, 3))
redis.call('sadd', KEYS[1], ARGV[1])
return -1
"""
_DELETE_IF_EQUAL = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


@dataclass(frozen=True, slots=True)
class SandboxRecord:
    """What kiln knows about one sandbox across processes."""

    id: str
    template: str
    volume: str
    network: str
    container_id: str = ""
    ip: str = ""
    state: str = "provisioning"  # provisioning | warm | in_use | idle
    owner: str = ""
    chat: str = ""
    created: float = 0.0
    last_used: float = 0.0
    preview: str = ""  # the backend's preview address of the dev port (host:port)

    def with_changes(self, **changes: Any) -> SandboxRecord:
        """A copy with some fields changed."""
        return replace(self, **changes)

    def handle(self) -> Sandbox:
        """The handle callers get for this sandbox (its dev port is its template's)."""
        return Sandbox(
            id=self.id,
            template=self.template,
            container_id=self.container_id,
            volume=self.volume,
            network=self.network,
            ip=self.ip,
            dev_port=get_template(self.template).dev_port,
            owner=self.owner,
            chat=self.chat,
            preview=self.preview,
        )


_FLOAT_FIELDS = {"created", "last_used"}
_FIELD_NAMES = {f.name for f in fields(SandboxRecord)}


def _to_mapping(record: SandboxRecord) -> dict[Any, str]:
    return {key: str(value) for key, value in asdict(record).items()}


def _from_mapping(mapping: Mapping[Any, Any]) -> SandboxRecord | None:
    if not {"id", "template", "volume", "network"} <= mapping.keys():
        return None
    values: dict[str, Any] = {str(k): str(v) for k, v in mapping.items() if k in _FIELD_NAMES}
    try:
        for name in _FLOAT_FIELDS & values.keys():
            values[name] = float(values[name])
    except ValueError:
        return None
    return SandboxRecord(**values)


def registry_prefix(instance: str) -> str:
    """The prefix of every key of ``instance``'s registry (admission counts sandboxes there)."""
    return f"kiln:registry:{instance}"


class SandboxRegistry:
    """The sandbox records of one kiln instance in Redis."""

    def __init__(self, client: redis.asyncio.Redis, instance: str) -> None:
        self._redis = client
        self._prefix = registry_prefix(instance)

    @classmethod
    def from_url(cls, url: str, instance: str) -> SandboxRegistry:
        """A registry on a new Redis connection pool (closed by :meth:`aclose`)."""
        return cls(redis.asyncio.Redis.from_url(url, decode_responses=True), instance)

    @property
    def redis(self) -> redis.asyncio.Redis:
        """The Redis client (other per-sandbox state of the same Redis is cleaned up with it)."""
        return self._redis

    async def aclose(self) -> None:
        """Close the Redis connections."""
        with wrap_redis_errors("close"):
            await self._redis.aclose()

    def _rec(self, sandbox_id: str) -> str:
        return f"{self._prefix}:rec:{sandbox_id}"

    def _chat(self, chat: str) -> str:
        return f"{self._prefix}:chat:{chat}"

    async def save(self, record: SandboxRecord) -> None:
        """Store a record, replacing any earlier one with its id."""
        with wrap_redis_errors(f"save sandbox {record.id!r}"):
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.delete(self._rec(record.id))
                pipe.hset(self._rec(record.id), mapping=_to_mapping(record))
                pipe.sadd(f"{self._prefix}:ids", record.id)
                await pipe.execute()

    async def save_within(self, record: SandboxRecord, limit: int) -> int | None:
        """Store a new record unless the instance holds ``limit`` sandboxes already; ``None``
        when saved, else how many it holds (the record is not saved)."""
        flat = [item for pair in _to_mapping(record).items() for item in pair]
        keys = [f"{self._prefix}:ids", self._rec(record.id)]
        with wrap_redis_errors(f"save sandbox {record.id!r}"):
            held = int(await self._redis.eval(_SAVE_WITHIN, 2, *keys, record.id, limit, *flat))
        return None if held < 0 else held

    async def get(self, sandbox_id: str) -> SandboxRecord | None:
        """The record of ``sandbox_id``, or ``None``."""
        with wrap_redis_errors(f"read sandbox {sandbox_id!r}"):
            mapping = await self._redis.hgetall(self._rec(sandbox_id))
        return _from_mapping(mapping)

    async def update(self, sandbox_id: str, **changes: Any) -> bool:
        """Change fields of an existing record; ``False`` when there is none."""
        unknown = changes.keys() - _FIELD_NAMES
        if unknown:
            raise ValueError(f"not SandboxRecord fields: {sorted(unknown)!r}")
        flat = [str(item) for pair in changes.items() for item in pair]
        with wrap_redis_errors(f"update sandbox {sandbox_id!r}"):
            result = await self._redis.eval(_UPDATE_IF_EXISTS, 1, self._rec(sandbox_id), *flat)
        return int(result) >= 0

    async def all(self) -> list[SandboxRecord]:
        """Every record of this instance."""
        with wrap_redis_errors("list sandboxes"):
            ids = sorted(str(i) for i in await self._redis.smembers(f"{self._prefix}:ids"))
            async with self._redis.pipeline(transaction=False) as pipe:
                for sandbox_id in ids:
                    pipe.hgetall(self._rec(sandbox_id))
                mappings = await pipe.execute()
        records = [_from_mapping(mapping) for mapping in mappings]
        return [record for record in records if record is not None]

    async def delete(self, record: SandboxRecord) -> None:
        """Forget a sandbox and its chat binding (if the binding still names it)."""
        with wrap_redis_errors(f"delete sandbox {record.id!r}"):
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.delete(self._rec(record.id))
                pipe.srem(f"{self._prefix}:ids", record.id)
                await pipe.execute()
        if record.chat:
            await self.unbind_chat(record.chat, record.id)

    async def bind_chat(self, chat: str, sandbox_id: str) -> str:
        """Bind ``chat`` to ``sandbox_id`` unless it already has a sandbox; the winner's id."""
        with wrap_redis_errors(f"bind chat {chat!r}"):
            await self._redis.set(self._chat(chat), sandbox_id, nx=True)
            winner = await self._redis.get(self._chat(chat))
        return str(winner) if winner is not None else sandbox_id

    async def chat_sandbox(self, chat: str) -> str | None:
        """The id of the chat's sandbox, if it has one."""
        with wrap_redis_errors(f"read chat {chat!r}"):
            value = await self._redis.get(self._chat(chat))
        return None if value is None else str(value)

    async def unbind_chat(self, chat: str, sandbox_id: str) -> None:
        """Remove the chat's binding if it still names ``sandbox_id``."""
        with wrap_redis_errors(f"unbind chat {chat!r}"):
            await self._redis.eval(_DELETE_IF_EQUAL, 1, self._chat(chat), sandbox_id)

    async def clear(self) -> int:
        """Delete every key of this instance (the test suite's final sweep); how many."""
        removed = 0
        with wrap_redis_errors("clear instance"):
            async for key in self._redis.scan_iter(match=f"{self._prefix}:*", count=500):
                removed += int(await self._redis.delete(key))
        return removed
