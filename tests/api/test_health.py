"""``/healthz``: all checks ok is 200; any failing or hanging check is 503 naming it."""

from __future__ import annotations

import anyio
import pytest

from app.api import health
from app.api.services import HealthCheck
from tests.api.conftest import Api

pytestmark = pytest.mark.anyio


async def fine() -> None:
    """A healthy dependency."""


async def broken() -> None:
    raise ConnectionRefusedError("redis is down")


async def hanging() -> None:
    await anyio.sleep_forever()


@pytest.fixture
def health_checks(request: pytest.FixtureRequest) -> dict[str, HealthCheck]:
    checks: dict[str, HealthCheck] = getattr(request, "param", {"store": fine, "redis": fine})
    return checks


@pytest.mark.parametrize(
    "health_checks", [pytest.param({"store": fine, "redis": fine, "docker": fine}, id="all")]
)
async def test_all_checks_pass_is_200_without_auth(api: Api) -> None:
    response = await api.anonymous.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {
        "ok": True,
        "checks": {"store": {"ok": True}, "redis": {"ok": True}, "docker": {"ok": True}},
    }


@pytest.mark.parametrize(
    "health_checks", [pytest.param({"store": fine, "redis": broken}, id="redis-down")]
)
async def test_a_failing_check_is_503_naming_it(api: Api) -> None:
    response = await api.anonymous.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["ok"] is False
    assert body["checks"]["store"] == {"ok": True}
    assert body["checks"]["redis"] == {
        "ok": False,
        "error": "ConnectionRefusedError: redis is down",
    }


async def test_a_hanging_check_fails_after_its_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(health, "CHECK_TIMEOUT_SECONDS", 0.05)
    results = await health.run_checks({"docker": hanging, "store": fine})
    assert list(results) == ["docker", "store"]
    assert results["docker"]["ok"] is False
    assert "no answer" in results["docker"]["error"]
    assert results["store"] == {"ok": True}
