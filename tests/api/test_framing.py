"""Framing policy: the UI and the API may not be framed; a preview only by the UI's origin."""

from __future__ import annotations

import httpx
import pytest

from app.api.framing import ui_source
from app.api.services import ApiSettings
from tests.api.conftest import Api

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("path", [pytest.param("/", id="ui"), pytest.param("/api/me", id="api")])
async def test_the_ui_and_the_api_cannot_be_framed(api: Api, path: str) -> None:
    response = await api.alice.client.get(path)
    assert response.headers["content-security-policy"] == "frame-ancestors 'none'"
    assert response.headers["x-frame-options"] == "DENY"


async def test_a_preview_may_be_framed_by_the_ui_only(api: Api) -> None:
    async with httpx.AsyncClient(base_url=api.url) as browser:
        response = await browser.get("/", headers={"Host": "abc123.preview.localhost:8000"})
    assert response.status_code == 401  # even a refusal carries the policy
    assert response.headers["content-security-policy"] == "frame-ancestors localhost:8000"
    assert "x-frame-options" not in response.headers


@pytest.mark.parametrize(
    ("host", "port", "source"),
    [
        pytest.param("localhost", 8000, "localhost:8000", id="port"),
        pytest.param("kiln.example", 443, "kiln.example", id="https-default"),
        pytest.param("kiln.example", None, "kiln.example", id="no-port"),
    ],
)
def test_ui_source(host: str, port: int | None, source: str) -> None:
    assert ui_source(ApiSettings(public_host=host, public_port=port)) == source
