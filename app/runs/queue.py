"""The run queue: the Redis Stream ``kiln:runs`` read by the consumer group ``kiln-workers``.

Delivery is at least once: an entry stays in the group's pending list, owned by the worker that
read it, until that worker acknowledges it after the run ended. A worker that dies leaves its
entries pending; once an entry has been idle for ``KILN_RUN_CLAIM_IDLE`` seconds another worker
takes it over with ``XAUTOCLAIM`` and resumes the run from its checkpoint.

**Heartbeat.** A live worker keeps its entries fresh: every few seconds it re-claims each one to
itself (``XCLAIM ... JUSTID``, which resets the idle time without counting a delivery). The
re-claim runs in a Lua script that first checks, with ``XPENDING``, that the entry is still its
own: a worker that paused too long (and so lost its entry to another) learns it from the
heartbeat's answer instead of stealing the entry back. An entry gone from the stream altogether
(a Redis killed while an append-only write was postponed comes back without the run's last
queue writes: measured, a run then hung until its deadline) is nobody's to take: its worker
goes on, fenced by the run's record (a run ended or taken over elsewhere is abandoned).

Acknowledged entries are deleted (``XACK`` + ``XDEL``), so the stream only holds work not done.

**Fair shares across users.** Each entry names its run's user. A worker that reads a fresh entry
asks :meth:`RunQueue.defer_if_unfair` before running it: when a waiting entry (not yet read,
among the next :data:`FAIR_SCAN` of the stream) belongs to a user who holds fewer worker slots
(entries read and not acknowledged: runs in progress, or of a dead worker), or as many but was
served longer ago (``kiln:runs:served``: user -> the serial of their last start, a counter in
``kiln:runs:served:serial``), the entry goes to the back of the stream and the worker reads
again. Slots go round-robin across users: a user with runs in progress never takes a freed
slot ahead of a waiting user with fewer, and the third user behind two busy ones starts when
the first run ends. The move is one Lua script (``XADD``
of the same fields at the tail, ``XACK`` + ``XDEL`` of the read entry), so at every moment the
run is in exactly one entry: delivery stays at least once and a crash leaves it to be
reclaimed or read as before. Reclaimed entries are never deferred (they resume a run).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import redis.asyncio
import redis.exceptions

from app.runs.errors import redis_errors

_ENTRY_ID = re.compile(r"\d+-\d+")
STREAM = "kiln:runs"
GROUP = "kiln-workers"

FAIR_SCAN = 64  # waiting entries a fairness check looks at (the queue is mostly short)
_DEFER_IF_UNFAIR = """
local stream, served, serial = KEYS[1], KEYS[2], KEYS[3]
local group, read_id, user = ARGV[1], ARGV[2], ARGV[3]
local function user_of(fields)
  for i = 1, #fields, 2 do
    if fields[i] == 'user_id' then return fields[i + 1] end
  end
  return ''
end
local held, pending = {}, {}
for _, entry in ipairs(redis.call('XPENDING', stream, group, '-', '+', 1000)) do
  local id = entry[1]
  if id ~= read_id then
    pending[id] = true
    local found = redis.call('XRANGE', stream, id, id)
    if #found > 0 then
      local owner = user_of(found[1][2])
      held[owner] = (held[owner] or 0) + 1
    end
  end
end
local function rank(who)
  return held[who] or 0, tonumber(redis.call('HGET', served, who) or '0')
end
local this = redis.call('XRANGE', stream, read_id, read_id)
if #this == 0 then return '' end
local mine, my_turn = rank(user)
for _, entry in ipairs(redis.call('XRANGE', stream, '(' .. read_id, '+', 'COUNT', ARGV[4])) do
  local other = user_of(entry[2])
  if not pending[entry[1]] and other ~= user then
    local theirs, their_turn = rank(other)
    if theirs < mine or (theirs == mine and their_turn < my_turn) then
      local moved = redis.call('XADD', stream, '*', unpack(this[1][2]))
      redis.call('XACK', stream, group, read_id)
      redis.call('XDEL', stream, read_id)
      return moved
    end
  end
end
redis.call('HSET', served, user, redis.call('INCR', serial))
redis.call('EXPIRE', served, 86400)  -- users gone a day need no turn order
return ''
"""
_HEARTBEAT = """
local pending = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if #pending == 0 and #redis.call('XRANGE', KEYS[1], ARGV[3], ARGV[3]) == 0 then
  return 2
end
if #pending == 0 or pending[1][2] ~= ARGV[2] then
  return 0
end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'JUSTID')
return 1
"""
# What a heartbeat found: the entry is the worker's (kept fresh), another's, or in no one's hands
# and gone from the stream (acknowledged, or lost by a Redis that came back without its last
# writes: nobody can take the run over through the queue, the run's record is the fence).
TAKEN, OWNED, GONE = 0, 1, 2


@dataclass(frozen=True)
class Delivery:
    """One queue entry handed to a worker; ``reclaimed`` if taken over from another."""

    entry_id: str
    run_id: str
    reclaimed: bool = False
    user_id: str = ""  # "" for an entry queued before entries named their user


class RunQueue:
    """Enqueue, read, reclaim, heartbeat and acknowledge run entries."""

    def __init__(
        self, client: redis.asyncio.Redis, stream: str = STREAM, group: str = GROUP
    ) -> None:
        """The queue ``stream`` read by consumer group ``group``."""
        self._redis, self.stream, self.group = client, stream, group
        self._heartbeat = client.register_script(_HEARTBEAT)
        self._defer = client.register_script(_DEFER_IF_UNFAIR)

    async def ensure_group(self) -> None:
        """Create the stream and the consumer group unless they exist."""
        with redis_errors(f"creating the consumer group {self.group!r}"):
            try:
                await self._redis.xgroup_create(self.stream, self.group, id="0", mkstream=True)
            except redis.exceptions.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    async def enqueue(self, run_id: str, user_id: str = "") -> str:
        """Add a run of ``user_id`` to the queue; the entry id."""
        with redis_errors(f"queueing run {run_id!r}"):
            entry = await self._redis.xadd(self.stream, {"run_id": run_id, "user_id": user_id})
        return _text(entry)

    async def defer_if_unfair(self, delivery: Delivery) -> bool:
        """Move a freshly read entry to the back of the queue when a waiting entry's user holds
        fewer slots than its user (module docstring); whether it was moved."""
        if delivery.reclaimed:
            return False
        arguments: list[str | int] = [self.group, delivery.entry_id, delivery.user_id, FAIR_SCAN]
        with redis_errors(f"checking the fair share of queue entry {delivery.entry_id!r}"):
            keys = [self.stream, f"{self.stream}:served", f"{self.stream}:served:serial"]
            moved = await self._defer(keys=keys, args=arguments)
        return bool(moved)

    async def read(self, consumer: str, count: int = 1, block_ms: int = 1000) -> list[Delivery]:
        """New entries for ``consumer``, waiting up to ``block_ms`` for one."""
        with redis_errors("reading the run queue"):
            answer: Any = await self._redis.xreadgroup(
                self.group, consumer, {self.stream: ">"}, count=count, block=block_ms
            )
        return [
            delivery
            for entry_id, fields in _entries(answer)
            if (delivery := _delivery(entry_id, fields, reclaimed=False)) is not None
        ]

    async def reclaim(
        self, consumer: str, min_idle_seconds: float, count: int = 1
    ) -> list[Delivery]:
        """Entries idle for ``min_idle_seconds`` (their worker is gone), now ``consumer``'s."""
        with redis_errors("reclaiming idle runs"):
            answer = await self._redis.xautoclaim(
                self.stream,
                self.group,
                consumer,
                min_idle_time=int(min_idle_seconds * 1000),
                start_id="0-0",
                count=count,
            )
        # [next cursor, claimed entries, deleted ids]: only the entries matter.
        entries = answer[1] if len(answer) > 1 else []
        return [
            delivery
            for entry_id, fields in _entries(entries)
            if (delivery := _delivery(entry_id, fields, reclaimed=True)) is not None
        ]

    async def heartbeat(self, consumer: str, entry_id: str) -> int:
        """Keep ``consumer``'s entry fresh: :data:`OWNED`; :data:`TAKEN` when another consumer
        has it (or it waits to be read again); :data:`GONE` when it is in no one's hands and
        no longer in the stream."""
        with redis_errors(f"refreshing queue entry {entry_id!r}"):
            found = await self._heartbeat(keys=[self.stream], args=[self.group, consumer, entry_id])
        return int(found)

    async def ack(self, entry_id: str) -> None:
        """The entry's run is finished: forget the entry."""
        with redis_errors(f"acknowledging queue entry {entry_id!r}"):
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.xack(self.stream, self.group, entry_id)
                pipe.xdel(self.stream, entry_id)
                await pipe.execute()

    async def pending_count(self) -> int:
        """Entries read but not acknowledged (runs in progress or of dead workers)."""
        with redis_errors("counting pending runs"):
            summary = await self._redis.xpending(self.stream, self.group)
        return int(summary["pending"])


def _entries(node: Any) -> Iterator[tuple[Any, Any]]:
    """The ``(id, fields)`` entries of a stream reply, in order, whatever its nesting: RESP2
    answers ``[[stream, [entries]]]``, RESP3 ``{stream: [[entries]]}``."""
    if isinstance(node, dict):
        for value in node.values():
            yield from _entries(value)
    elif isinstance(node, list | tuple):
        if len(node) == 2 and _is_entry_id(node[0]) and isinstance(node[1], dict | None):
            yield node[0], node[1]
        else:
            for item in node:
                yield from _entries(item)


def _is_entry_id(value: Any) -> bool:
    return isinstance(value, bytes | str) and _ENTRY_ID.fullmatch(_text(value)) is not None


def _delivery(entry_id: Any, fields: Any, *, reclaimed: bool) -> Delivery | None:
    """A delivery from a stream entry (None for an entry deleted meanwhile). An entry without
    a run id gets an empty one: no run has it, so the worker drops (acknowledges) it."""
    if not fields:
        return None
    run_id = fields.get(b"run_id") or fields.get("run_id") or ""
    user_id = fields.get(b"user_id") or fields.get("user_id") or ""
    return Delivery(_text(entry_id), _text(run_id), reclaimed, _text(user_id))


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
