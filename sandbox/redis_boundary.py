"""The one wrapper of redis-py's exceptions, for every layer that talks to Redis.

An unreachable server (connection refused or lost, a timeout) and any other Redis failure (a
script error, a wrong type, out of memory) are raised as the caller's own exception classes, so
the sandbox layer reports :class:`~sandbox.errors.RedisUnavailable` (a ``SandboxUnavailable``
with its own code, ``redis_unavailable``) and the runs machinery its ``QueueUnavailable`` from
the same rule. Messages name the action that failed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import redis.exceptions

from sandbox.errors import RedisUnavailable

UNREACHABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


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
    except UNREACHABLE as exc:
        raise unreachable(f"redis unreachable while {action}: {exc!s}") from exc
    except redis.exceptions.RedisError as exc:
        raise (failed or unreachable)(f"redis failed while {action}: {exc!s}") from exc
