"""The stack ``kiln serve`` and ``kiln worker`` open: store, Redis, sandbox manager."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.api.health import run_checks
from app.config import ServiceSettings
from app.errors import ConfigError
from app.service.stack import open_stack
from tests.sandbox.docker_support import settings_for, swept_instance

pytestmark = [pytest.mark.anyio, pytest.mark.docker, pytest.mark.redis]


async def test_the_stack_opens_and_its_health_checks_pass(tmp_path: Path, redis_url: str) -> None:
    settings = ServiceSettings(tmp_path, "s" * 20, redis_url=redis_url)
    # Its instance is explicit: the stack claims it for tmp_path (a volume, swept afterwards).
    with swept_instance("test-stack", redis_url) as instance:
        async with open_stack(settings, settings_for(instance, redis_url)) as stack:
            checks = await run_checks(stack.health_checks())
            workers = stack.workers(2)
            assert stack.manager.settings.redis_url == redis_url
    assert checks == {"store": {"ok": True}, "redis": {"ok": True}, "docker": {"ok": True}}
    assert len({worker.name for worker in workers}) == 2


async def test_a_stack_needs_a_redis_url(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no Redis URL"):
        async with open_stack(ServiceSettings(tmp_path, "s" * 20)):
            pass
