"""``kiln doctor``'s warm pool check: the bounds, and the targets a serving process published."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis.asyncio

from app.cli.doctor_pool import check_pool
from sandbox.lifecycle.pool_report import publish_target
from sandbox.lifecycle.pool_sizing import PoolTarget

pytestmark = pytest.mark.anyio


def test_an_off_pool_says_so(tmp_path: Path) -> None:
    result = check_pool(None, tmp_path, {"KILN_WARM_POOL_SIZE": "0"})
    assert result.ok
    assert result.detail.startswith("off")


def test_without_a_serving_process_the_bounds_are_shown(tmp_path: Path) -> None:
    result = check_pool(None, tmp_path, {"KILN_WARM_POOL_TEMPLATES": "vanilla"})
    assert result.ok
    assert result.detail == (
        "1 to 3 per template (vanilla) by the acquires of the last 600s, 1 starting at once; "
        "no kiln serve is running to report it"
    )


def test_a_malformed_setting_fails_naming_it(tmp_path: Path) -> None:
    result = check_pool(None, tmp_path, {"KILN_WARM_POOL_MAX": "lots"})
    assert not result.ok
    assert "KILN_WARM_POOL_MAX='lots'" in result.detail


async def test_the_published_target_and_why_are_shown(tmp_path: Path, redis_url: str) -> None:
    instance = "doctor-pool-test"
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        burst = PoolTarget(3, "burst", "5 acquires in the last 600s: the maximum")
        await publish_target(client, instance, "vanilla", 2, burst, now=1.0)
        result = check_pool(redis_url, tmp_path, {"KILN_INSTANCE": instance})
    finally:
        await client.delete(f"kiln:pool:{instance}")
        await client.aclose()
    assert result.ok
    assert result.detail.endswith(
        "now vanilla: 2 ready, target 3 (burst: 5 acquires in the last 600s: the maximum)"
    )


def test_nothing_published_says_no_process_serves(tmp_path: Path, redis_url: str) -> None:
    result = check_pool(redis_url, tmp_path, {"KILN_INSTANCE": "doctor-pool-none"})
    assert "no pool reported (instance 'doctor-pool-none'" in result.detail
