"""The assembled app: the UI's static files beside the API, and the placeholder page."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from app.api.app import WEB_DIR, build_app
from app.store import Store
from tests.api.harness import FakeSandboxes, serving

pytestmark = pytest.mark.anyio


class NoRuns:
    """The UI tests submit nothing."""


@pytest.fixture
async def ui(store: Store, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """An app whose UI folder holds an index page and a stylesheet."""
    web = tmp_path / "web"
    web.mkdir()
    (web / "index.html").write_text("<!doctype html><title>kiln ui</title>")
    (web / "style.css").write_text("body { color: red }")
    app = build_app(store, NoRuns(), FakeSandboxes(), web_dir=web)  # type: ignore[arg-type]
    async with serving(app) as url, httpx.AsyncClient(base_url=url) as client:
        yield client


async def test_the_index_page_is_served_at_the_root(ui: httpx.AsyncClient) -> None:
    response = await ui.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "kiln ui" in response.text


@pytest.mark.parametrize(
    "path", [pytest.param("/static/style.css", id="static"), pytest.param("/style.css", id="root")]
)
async def test_static_files_are_served(ui: httpx.AsyncClient, path: str) -> None:
    response = await ui.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/css")


async def test_a_missing_file_is_a_json_404_and_the_api_still_answers(
    ui: httpx.AsyncClient,
) -> None:
    missing = await ui.get("/static/nope.js")
    api = await ui.get("/api/me")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
    assert api.status_code == 401


async def test_a_placeholder_page_stands_in_without_a_ui(store: Store, tmp_path: Path) -> None:
    app = build_app(store, NoRuns(), FakeSandboxes(), web_dir=tmp_path)  # type: ignore[arg-type]
    async with serving(app) as url, httpx.AsyncClient(base_url=url) as client:
        response = await client.get("/")
    assert response.status_code == 200
    assert "The web UI is not installed" in response.text


def test_the_shipped_ui_has_an_index_page() -> None:
    assert (WEB_DIR / "index.html").is_file()
