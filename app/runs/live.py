"""Live run events for a whole process through ONE Redis pub/sub connection.

Every follower of a run (an SSE client, ``kiln run``) needs the events Redis publishes on the
run's channel. A pub/sub connection per follower let one user with a few hundred open streams
take every connection of the pool, and Redis with it, away from everybody. :class:`LiveEvents`
holds one connection for the process and fans messages out inside it:

- :meth:`LiveEvents.subscribe` registers a callback for a channel and returns once Redis has
  confirmed the channel's subscription (bounded by ``confirm_seconds``), so a follower that then
  reads the store misses nothing; the first follower of a channel subscribes it, the last one
  to leave (:meth:`LiveEvents.unsubscribe`) unsubscribes it;
- :meth:`LiveEvents.run` is the one reader: it blocks on the connection (no read timeout: a
  read cut by a timeout can leave the connection out of step and force a reconnect, during
  which the subscriptions are gone) and hands every message to the channel's callbacks;
  subscribing and unsubscribing only write, one writer at a time;
- when Redis fails, the reader logs, waits (doubling from 0.25 s to 5 s: never a busy loop) and
  reads again (redis-py reconnects and subscribes the channels again); followers read the
  store meanwhile, so nothing is lost, only later.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio
import redis.asyncio
import redis.exceptions

log = logging.getLogger(__name__)

Deliver = Callable[[bytes | str], None]
CONFIRM_SECONDS = 5.0
RETRY_FIRST_SECONDS = 0.25
RETRY_MAX_SECONDS = 5.0


class LiveEvents:
    """The process's one pub/sub connection and its fan-out (see the module docstring)."""

    def __init__(
        self, client: redis.asyncio.Redis, *, confirm_seconds: float = CONFIRM_SECONDS
    ) -> None:
        """Fan out ``client``'s pub/sub messages; :meth:`run` must be running."""
        self._pubsub = client.pubsub()
        self._confirm_seconds = confirm_seconds
        self._listeners: dict[str, list[Deliver]] = {}
        self._confirmed: dict[str, anyio.Event] = {}
        self._connected = anyio.Event()  # set once a subscription made the connection
        self._writing = anyio.Lock()
        self._failures = 0

    @property
    def channels(self) -> frozenset[str]:
        """The channels somebody listens to now."""
        return frozenset(self._listeners)

    async def subscribe(self, channel: str, deliver: Deliver) -> bool:
        """Call ``deliver`` with every message on ``channel`` until :meth:`unsubscribe`;
        whether Redis confirmed the subscription in time."""
        listeners = self._listeners.setdefault(channel, [])
        listeners.append(deliver)
        confirmed = self._confirmed.setdefault(channel, anyio.Event())
        if len(listeners) == 1:
            try:
                async with self._writing:
                    await self._pubsub.subscribe(channel)
            except redis.exceptions.RedisError as exc:
                log.warning("cannot subscribe %r (followers read the store): %s", channel, exc)
                return False
            self._connected.set()
        with anyio.move_on_after(self._confirm_seconds):
            await confirmed.wait()
        return confirmed.is_set()

    async def unsubscribe(self, channel: str, deliver: Deliver) -> None:
        """Stop calling ``deliver``; the channel is unsubscribed when nobody listens."""
        listeners = self._listeners.get(channel, [])
        if deliver in listeners:
            listeners.remove(deliver)
        if listeners or channel not in self._listeners:
            return
        del self._listeners[channel]
        self._confirmed.pop(channel, None)
        try:
            async with self._writing:
                await self._pubsub.unsubscribe(channel)
        except redis.exceptions.RedisError as exc:
            log.warning("cannot unsubscribe %r: %s", channel, exc)

    async def run(self) -> None:
        """Read the connection until cancelled, fanning messages out; then close it."""
        try:
            await self._connected.wait()
            while True:
                try:
                    message = await self._pubsub.get_message(timeout=None)
                    self._failures = 0
                except redis.exceptions.RedisError as exc:
                    await self._after_failure(exc)
                    continue
                if message is not None:
                    self._dispatch(message)
        finally:
            with anyio.CancelScope(shield=True):
                await self._pubsub.aclose()  # type: ignore[no-untyped-call]

    def _dispatch(self, message: dict[str, object]) -> None:
        raw = message.get("channel")
        channel = raw.decode() if isinstance(raw, bytes) else str(raw)
        kind = message.get("type")
        if kind == "subscribe" and channel in self._confirmed:
            self._confirmed[channel].set()
        elif kind == "message":
            data = message.get("data")
            if isinstance(data, bytes | str):
                for deliver in list(self._listeners.get(channel, ())):
                    deliver(data)

    async def _after_failure(self, exc: redis.exceptions.RedisError) -> None:
        self._failures += 1
        delay = min(RETRY_FIRST_SECONDS * 2 ** (self._failures - 1), RETRY_MAX_SECONDS)
        log.warning("live run events interrupted (%s); reading again in %.2f s", exc, delay)
        await anyio.sleep(delay)
