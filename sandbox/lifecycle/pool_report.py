"""What each warm pool aims for and why, published in Redis for ``kiln doctor`` (another process).

The pool lives in the process that serves sandboxes; the doctor reads the hash
``kiln:pool:{instance}`` (template -> JSON ``{ready, target, rule, why, at}``). It expires
:data:`REPORT_TTL_SECONDS` after the last publication (pools decide at least every minute), so the
pool of a process that died stops being reported.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import redis.asyncio

from sandbox.lifecycle.pool_sizing import PoolTarget
from sandbox.redis_boundary import wrap_redis_errors

REPORT_TTL_SECONDS = 300


def pool_key(instance: str) -> str:
    """The Redis hash of ``instance``'s warm pool report."""
    return f"kiln:pool:{instance}"


async def publish_target(
    client: redis.asyncio.Redis,
    instance: str,
    template: str,
    ready: int,
    target: PoolTarget,
    *,
    now: float,
) -> None:
    """Record ``template``'s ready sandboxes and target; ``RedisUnavailable`` if Redis is away."""
    entry = {"ready": ready, "target": target.size, "rule": target.rule, "why": target.why}
    key = pool_key(instance)
    with wrap_redis_errors(f"report the warm pool of {template!r}"):
        async with client.pipeline(transaction=True) as pipe:
            pipe.hset(key, template, json.dumps({**entry, "at": now}))
            pipe.expire(key, REPORT_TTL_SECONDS)
            await pipe.execute()


def describe_pool(report: Mapping[Any, Any]) -> list[str]:
    """One line per template of a report (``HGETALL`` of :func:`pool_key`, bytes or text):
    ``vanilla: 1 ready, target 3 (burst: 5 acquires in the last 600s: the maximum ...)``."""
    lines = []
    for name, raw in sorted((_text(k), _text(v)) for k, v in report.items()):
        try:
            entry = json.loads(raw)
            lines.append(
                f"{name}: {entry['ready']} ready, target {entry['target']} "
                f"({entry['rule']}: {entry['why']})"
            )
        except (ValueError, KeyError, TypeError):
            lines.append(f"{name}: unreadable report {raw[:80]!r}")
    return lines


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
