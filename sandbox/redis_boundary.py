"""The one wrapper of redis-py's exceptions, for every layer that talks to Redis.

An unreachable server (connection refused or lost, a timeout) and any other Redis failure (a
script error, a wrong type, out of memory) are raised as the caller's own exception classes, so
the sandbox layer reports :class:`~sandbox.errors.RedisUnavailable` (a ``SandboxUnavailable``
with its own code, ``redis_unavailable``) and the runs machinery its ``QueueUnavailable`` from
the same rule. Messages name the action that failed.

A refused password (``WRONGPASS``, ``NOAUTH``: a setting to fix, not an outage) is
:class:`~sandbox.errors.RedisAuthFailed` wherever the caller takes that kind of failure (its
``unreachable`` class is ``RedisUnavailable`` or a base of it); :func:`ping_redis` is the check
every process makes at start, so a wrong password stops it there, in words, with that code.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import redis.exceptions
from redis.asyncio import Redis

from sandbox.errors import RedisAuthFailed, RedisUnavailable

UNREACHABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
SIGN_IN = "(set the password in REDIS_URL or KILN_REDIS_PASSWORD_FILE)"


@contextlib.contextmanager
def wrap_redis_errors(
    action: str,
    *,
    unreachable: type[Exception] = RedisUnavailable,
    failed: type[Exception] | None = None,
) -> Iterator[None]:
    """Raise redis-py failures during ``action`` as ``unreachable`` or ``failed``.

    ``failed`` (any Redis error other than an unreachable server) defaults to ``unreachable``.
    """
    try:
        yield
    except redis.exceptions.AuthenticationError as exc:
        refused = RedisAuthFailed if issubclass(RedisAuthFailed, unreachable) else unreachable
        raise refused(f"redis refused the password while {action}: {exc!s} {SIGN_IN}") from exc
    except UNREACHABLE as exc:
        raise unreachable(f"redis unreachable while {action}: {exc!s}") from exc
    except redis.exceptions.RedisError as exc:
        raise (failed or unreachable)(f"redis failed while {action}: {exc!s}") from exc


async def ping_redis(client: Redis) -> None:
    """Check at start that ``client``'s Redis answers and takes its password:
    :class:`~sandbox.errors.RedisAuthFailed` or :class:`~sandbox.errors.RedisUnavailable`."""
    try:
        with wrap_redis_errors("checking it at start"):
            await client.ping()
    except RedisAuthFailed as exc:
        if client.connection_pool.connection_kwargs.get("password") is not None:
            raise
        raise RedisAuthFailed(f"redis wants a password and kiln was given none {SIGN_IN}") from exc
