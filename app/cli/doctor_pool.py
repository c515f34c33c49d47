"""``kiln doctor``'s warm pool check: the bounds configured, and each template's target and why
as the process serving sandboxes last decided it (published in Redis by
:mod:`sandbox.lifecycle.pool_report`). Informational: it never fails (Redis has its own check).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import redis
import redis.exceptions

from app.cli.doctor_result import CheckResult
from app.service.embedded_redis import recorded_url
from sandbox import SandboxSettings, describe_pool, pool_key

NAME = "warm pool"


def check_pool(redis_url: str | None, data_dir: Path, env: Mapping[str, str]) -> CheckResult:
    """The pool's configuration and, if a kiln process reports one, its targets and why."""
    try:
        settings = SandboxSettings.from_env(env)
    except ValueError as exc:  # SandboxConfigError: the message names the variable
        return CheckResult(NAME, False, str(exc), "fix the setting it names")
    low, high = settings.warm_pool_bounds
    if high == 0:
        return CheckResult(NAME, True, "off (KILN_WARM_POOL_MIN and KILN_WARM_POOL_MAX are 0)")
    configured = (
        f"{low} to {high} per template ({', '.join(settings.warm_pool_templates)}) by the "
        f"acquires of the last {settings.warm_pool_window_seconds:g}s, "
        f"{settings.warm_pool_refills} starting at once"
    )
    url = redis_url or recorded_url(data_dir)
    if url is None:
        return CheckResult(NAME, True, f"{configured}; no kiln serve is running to report it")
    return CheckResult(NAME, True, f"{configured}; {now_reported(url, settings.instance)}")


def now_reported(url: str, instance: str) -> str:
    """What ``instance``'s pool reported last, in words."""
    client = redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3)
    try:
        report = client.hgetall(pool_key(instance))
    except (redis.exceptions.RedisError, ValueError) as exc:
        return f"its current targets are unknown: Redis does not answer ({exc})"
    finally:
        client.close()
    lines = describe_pool(report)
    if not lines:
        return f"no pool reported (instance {instance!r}: no kiln process serving sandboxes)"
    return "now " + "; ".join(lines)
