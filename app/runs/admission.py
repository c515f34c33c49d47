"""Admission of new runs: active-run limits, a request rate and the host's sandbox capacity,
checked atomically in Redis.

One Lua script checks every limit and, if all pass, takes the slot, in one step: concurrent
submits (any number of API processes) can never exceed a limit. The state lives in Redis:

===========================  ======  ====================================================
key                          type    content
===========================  ======  ====================================================
``kiln:active``              set     ids of every active (queued or running) run
``kiln:active:user:{id}``    set     active runs of one user
``kiln:active:chat:{id}``    set     active runs of one chat
``kiln:active:owners``       hash    run id -> ``"<user> <chat> <admitted at>"`` (release,
                                     reconcile)
``kiln:rate:{user}``         zset    the user's requests of the last minute (score: ms)
===========================  ======  ====================================================

**Capacity**: a run in a chat that has no sandbox yet will need a new one, so it is admitted
only while the host can take another sandbox: the sandboxes the registry of the sandbox layer
holds (``kiln:registry:{instance}``, :mod:`sandbox.lifecycle.registry`; warm ones do not count,
they are handed out or given up) plus the chats of active runs still waiting for theirs must
stay below ``SandboxSettings.sandbox_limit`` (``KILN_MAX_SANDBOXES``). The script reads those
registry keys by name (a single Redis, as kiln runs it; not a cluster). A run that loses a race
for the last sandbox anyway ends ``failed`` with the code ``sandbox_capacity``
(:mod:`app.runs.failures`). Every refusal carries ``retry_after`` seconds (the HTTP layer's
``Retry-After``).

Sets rather than counters: admitting or releasing the same run twice changes nothing, so a
retried release can never free a slot it did not hold. The rate is a sliding window of 60 s;
every request that passes the rate check counts, even one then refused by a concurrency limit
(a client hammering a busy chat is slowed down). Slots are released when a run ends
(:mod:`app.runs.worker`, :mod:`app.runs.cancel`, :mod:`app.runs.stale`); :meth:`Admission.reconcile`
frees slots whose run ended without releasing them (a process killed at the wrong moment).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import redis.asyncio

from app.config import ServiceSettings
from app.errors import AdmissionRefused
from app.runs.errors import redis_errors
from app.store import Store
from sandbox import (
    DEFAULT_TEMPLATE,
    HostCapacity,
    HostMemory,
    SandboxSettings,
    busy_bytes,
    registry_prefix,
)

ACTIVE_KEY = "kiln:active"
OWNERS_KEY = "kiln:active:owners"
RATE_WINDOW_MS = 60_000
# A slot whose run row is missing is only freed after this long: the submit that took it may
# still be writing the row.
ORPHAN_GRACE_SECONDS = 60.0
GIB, MIB = 2**30, 2**20
# Retry-After of each refusal (the rate's is computed: when its oldest request leaves the
# window). Sandboxes free up when runs end and idle ones are reaped: slower than run slots.
RETRY_AFTER_SECONDS = {
    "global": 10,
    "user": 5,
    "chat": 5,
    "sandboxes": 30,
    "user_sandboxes": 10,
    "memory": 30,
}

_ADMIT = """
local run, owner = ARGV[1], ARGV[2]
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local window = tonumber(ARGV[7])
if redis.call('SISMEMBER', KEYS[1], run) == 1 then
  return {'ok', 0, 0}
end
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now_ms - window)
local requests = redis.call('ZCARD', KEYS[5])
if requests >= tonumber(ARGV[6]) then
  local oldest = redis.call('ZRANGE', KEYS[5], 0, 0, 'WITHSCORES')
  return {'rate', requests, tonumber(oldest[2]) + window - now_ms}
end
redis.call('ZADD', KEYS[5], now_ms, run)
redis.call('PEXPIRE', KEYS[5], window)
local checks = {
  {KEYS[1], 'global', ARGV[3]}, {KEYS[2], 'user', ARGV[4]}, {KEYS[3], 'chat', ARGV[5]}
}
for _, check in ipairs(checks) do
  local active = redis.call('SCARD', check[1])
  if active >= tonumber(check[3]) then
    return {check[2], active, 0}
  end
end
-- Capacity: only a chat without a sandbox (and no active run already waiting for one) needs one.
local registry, chat, user = ARGV[9], ARGV[10], ARGV[11]
local per_user, idle_full = tonumber(ARGV[12]), tonumber(ARGV[13])
local headroom, new_size, waiting_size = tonumber(ARGV[14]), tonumber(ARGV[15]), tonumber(ARGV[16])
local function has_sandbox(id) return redis.call('EXISTS', registry .. ':chat:' .. id) == 1 end
if not has_sandbox(chat) then
  local used, mine, spare, waiting, waiting_count = 0, 0, 0, {}, 0
  for _, id in ipairs(redis.call('SMEMBERS', registry .. ':ids')) do
    local rec = redis.call('HMGET', registry .. ':rec:' .. id, 'state', 'last_used', 'owner')
    if rec[1] ~= 'warm' then
      -- An idle sandbox unused for a while is given up for a new one on a full host.
      if rec[1] == 'idle' and tonumber(now[1]) - tonumber(rec[2] or '0') > idle_full then
        spare = spare + 1
      else
        used = used + 1
      end
      -- The user's idle sandboxes are given up first for their new one: they do not count.
      if rec[3] == user and rec[1] ~= 'idle' then mine = mine + 1 end
    end
  end
  for _, held in ipairs(redis.call('HVALS', KEYS[4])) do
    local owner, other = string.match(held, '^(%S+) (%S+)')
    if other and not waiting[other] and not has_sandbox(other) then
      waiting[other] = true
      used, waiting_count = used + 1, waiting_count + 1
      if owner == user then mine = mine + 1 end
    end
  end
  if not waiting[chat] then
    if mine >= per_user then return {'user_sandboxes', mine, 0} end
    if used >= tonumber(ARGV[8]) then return {'sandboxes', used, 0} end
    if spare == 0 and headroom - waiting_count * waiting_size - new_size < 0 then
      return {'memory', math.max(0, math.floor(headroom / 1048576)), 0}
    end
  end
end
redis.call('SADD', KEYS[1], run)
redis.call('SADD', KEYS[2], run)
redis.call('SADD', KEYS[3], run)
redis.call('HSET', KEYS[4], run, owner)
return {'ok', 0, 0}
"""


def user_key(user_id: str) -> str:
    """The set of a user's active runs."""
    return f"kiln:active:user:{user_id}"


def chat_key(chat_id: str) -> str:
    """The set of a chat's active runs."""
    return f"kiln:active:chat:{chat_id}"


def rate_key(user_id: str) -> str:
    """The sorted set of a user's recent requests."""
    return f"kiln:rate:{user_id}"


class Admission:
    """Takes and releases run slots under the limits of :class:`ServiceSettings`."""

    def __init__(
        self,
        client: redis.asyncio.Redis,
        settings: ServiceSettings,
        sandboxes: SandboxSettings | None = None,
        room: Callable[[], Awaitable[HostCapacity]] | None = None,
    ) -> None:
        """Limits come from ``settings`` (``max_active_runs*``, ``user_requests_per_minute``)
        and ``sandboxes`` (instance, ``sandbox_limit``, the per-user limit and the memory
        reserve; from the environment unless given, as the sandbox manager's do); ``room``
        tells the memory a new sandbox may take where sandboxes live (the manager's
        ``memory_room``: each swarm node's; this host's ``MemAvailable`` above the reserve
        unless given)."""
        self._redis = client
        self._settings = settings
        self._sandboxes = sandboxes or SandboxSettings.from_env()
        self._admit = client.register_script(_ADMIT)
        self._room = room or self._host_room

    async def _host_room(self) -> HostCapacity:
        return HostCapacity(HostMemory.read().headroom(self._sandboxes.memory_reserve_percent))

    async def admit(
        self, run_id: str, user_id: str, chat_id: str, template: str = DEFAULT_TEMPLATE
    ) -> None:
        """Take a slot for ``run_id`` (a run of ``template``, which sizes a new sandbox) or
        raise :class:`AdmissionRefused` naming the limit."""
        limits = self._settings
        owner = f"{user_id} {chat_id} {time.time():.3f}"
        keys = [ACTIVE_KEY, user_key(user_id), chat_key(chat_id), OWNERS_KEY, rate_key(user_id)]
        arguments: list[Any] = [run_id, owner, limits.max_active_runs]
        arguments += [limits.max_active_runs_per_user, limits.max_active_runs_per_chat]
        arguments += [limits.user_requests_per_minute, RATE_WINDOW_MS]
        sandboxes = self._sandboxes
        arguments += [sandboxes.sandbox_limit, registry_prefix(sandboxes.instance), chat_id]
        arguments += [user_id, sandboxes.max_sandboxes_per_user, sandboxes.idle_ttl_full_seconds]
        room = await self._room()
        arguments += [room.headroom, busy_bytes(template), busy_bytes(DEFAULT_TEMPLATE)]
        with redis_errors(f"admitting run {run_id!r}"):
            verdict, count, wait_ms = await self._admit(keys=keys, args=arguments)
        verdict = _text(verdict)
        if verdict != "ok":
            retry_after = RETRY_AFTER_SECONDS.get(verdict) or max(1, math.ceil(wait_ms / 1000))
            message = self._refusal(verdict, int(count), room, template)
            raise AdmissionRefused(message, verdict, retry_after=retry_after)

    def _refusal(self, limit: str, count: int, room: HostCapacity, template: str) -> str:
        settings = self._settings
        if limit == "rate":
            return (
                f"too many messages: {count} in the last minute, the limit is "
                f"{settings.user_requests_per_minute}; wait a little"
            )
        if limit == "sandboxes":
            return (
                f"this server is running as many app sandboxes as it can: {count} of "
                f"{self._sandboxes.sandbox_limit} (KILN_MAX_SANDBOXES); try again in a minute"
            )
        if limit == "user_sandboxes":
            return (
                f"you have {count} app sandboxes busy, the most one user may have is "
                f"{self._sandboxes.max_sandboxes_per_user} (KILN_MAX_SANDBOXES_PER_USER); "
                "wait for a run to finish or cancel one"
            )
        if limit == "memory":
            return self._memory_refusal(room, template)
        if limit == "global":
            return (
                f"the service is busy: {count} runs are active, the limit is "
                f"{settings.max_active_runs}; try again shortly"
            )
        if limit == "user":
            return (
                f"you have {count} active runs, the limit is {settings.max_active_runs_per_user}; "
                "wait for one to finish or cancel it"
            )
        return (
            f"this chat has {count} active run(s), the limit is "
            f"{settings.max_active_runs_per_chat}; wait for it to finish or cancel it"
        )

    def _memory_refusal(self, room: HostCapacity, template: str) -> str:
        size = f"a new {template!r} app may use {busy_bytes(template) // MIB} MiB"
        left = max(room.headroom, 0) / GIB
        if room.node:  # a swarm: the node with the most memory unreserved
            return (
                f"the sandboxes' nodes are low on memory for another app: the roomiest, "
                f"{room.node[:12]}, has {left:.1f} GiB unreserved, and {size}; try again in a "
                "minute"
            )
        percent = self._sandboxes.memory_reserve_percent
        return (
            f"this host is low on memory for another app: {left:.1f} GiB available above the "
            f"{percent:.3g} % of its memory kept free (KILN_HOST_MEMORY_RESERVE), and {size}; "
            "try again in a minute"
        )

    async def release(self, run_id: str, user_id: str, chat_id: str) -> None:
        """Free the run's slot (doing it twice is harmless)."""
        with redis_errors(f"releasing the slot of run {run_id!r}"):
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.srem(ACTIVE_KEY, run_id)
                pipe.srem(user_key(user_id), run_id)
                pipe.srem(chat_key(chat_id), run_id)
                pipe.hdel(OWNERS_KEY, run_id)
                await pipe.execute()

    async def active_runs(self) -> set[str]:
        """The ids holding a slot."""
        with redis_errors("reading the active runs"):
            members = await self._redis.smembers(ACTIVE_KEY)
        return {_text(member) for member in members}

    async def reconcile(self, store: Store) -> list[str]:
        """Free the slots of runs that ended (or never got a row); the ids freed."""
        with redis_errors("reading the admission owners"):
            owners = await self._redis.hgetall(OWNERS_KEY)
        freed: list[str] = []
        for raw_run, raw_owner in owners.items():
            run_id = _text(raw_run)
            user_id, chat_id, admitted = _text(raw_owner).split(" ")
            run = await anyio.to_thread.run_sync(store.get_run, run_id)
            orphan = run is None and float(admitted) < time.time() - ORPHAN_GRACE_SECONDS
            if orphan or (run is not None and run.terminal):
                await self.release(run_id, user_id, chat_id)
                freed.append(run_id)
        return freed


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
