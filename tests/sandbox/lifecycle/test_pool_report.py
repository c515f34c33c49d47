"""The warm pool report in Redis: published with an expiry, described in words."""

from __future__ import annotations

import pytest
import redis.asyncio

from sandbox.lifecycle.pool_report import (
    REPORT_TTL_SECONDS,
    describe_pool,
    pool_key,
    publish_target,
)
from sandbox.lifecycle.pool_sizing import PoolTarget

pytestmark = pytest.mark.anyio


async def test_a_published_target_expires_with_its_process(redis_url: str) -> None:
    client = redis.asyncio.Redis.from_url(redis_url)
    key = pool_key("report-test")
    try:
        idle = PoolTarget(1, "idle", "no acquires in the last 600s: the minimum")
        await publish_target(client, "report-test", "vite-react", 1, idle, now=5.0)
        assert 0 < await client.ttl(key) <= REPORT_TTL_SECONDS
        lines = describe_pool(await client.hgetall(key))
    finally:
        await client.delete(key)
        await client.aclose()
    assert lines == [
        "vite-react: 1 ready, target 1 (idle: no acquires in the last 600s: the minimum)"
    ]


def test_templates_are_described_in_order_and_garbage_in_words() -> None:
    report = {
        b"vanilla": b'{"ready": 0, "target": 2, "rule": "demand", "why": "2 acquires"}',
        "nextjs": "{not json",
    }
    assert describe_pool(report) == [
        "nextjs: unreadable report '{not json'",
        "vanilla: 0 ready, target 2 (demand: 2 acquires)",
    ]
