"""A page opened by another name than kiln's public one is sent there, in words; the API, scripts
and previews answer on any host (``app.api.canonical_host``). The API fixture's public address is
``localhost:8000``."""

from __future__ import annotations

import pytest

from app.api.canonical_host import is_local_name, previews_share_its_site
from tests.api.conftest import Api

pytestmark = pytest.mark.anyio
NAVIGATE = {"Sec-Fetch-Mode": "navigate", "Accept": "text/html"}


@pytest.mark.parametrize(
    ("host", "path"),
    [
        pytest.param("127.0.0.1:8000", "/", id="loopback-ip"),
        pytest.param("[::1]:8000", "/chats/abc", id="ipv6-loopback"),
        pytest.param("kiln.localhost:8000", "/login?token=t0k", id="another-localhost-name"),
    ],
)
async def test_a_page_on_another_local_name_is_redirected_in_words(
    api: Api, host: str, path: str
) -> None:
    response = await api.anonymous.get(path, headers={**NAVIGATE, "Host": host})
    assert response.status_code == 307
    assert response.headers["location"] == f"http://localhost:8000{path}"
    assert "kiln is at" in response.text
    assert "only at kiln" in response.text


@pytest.mark.parametrize(
    "host",
    [
        pytest.param("192.168.1.5:8000", id="lan"),
        pytest.param("abc.preview.evil.example", id="preview-of-another-domain"),
    ],
)
async def test_another_machines_name_is_told_which_setting_to_change(api: Api, host: str) -> None:
    response = await api.anonymous.get("/", headers={**NAVIGATE, "Host": host})
    assert response.status_code == 421
    assert "location" not in response.headers
    assert "KILN_PUBLIC_HOST" in response.text


@pytest.mark.parametrize(
    ("host", "path", "headers"),
    [
        pytest.param("localhost:8000", "/", NAVIGATE, id="the-public-host"),
        pytest.param("127.0.0.1:8000", "/api/me", NAVIGATE, id="api"),
        pytest.param("127.0.0.1:8000", "/healthz", NAVIGATE, id="healthz"),
        pytest.param("127.0.0.1:8000", "/", {"Accept": "text/html"}, id="not-a-navigation"),
    ],
)
async def test_everything_else_answers_on_any_host(
    api: Api, host: str, path: str, headers: dict[str, str]
) -> None:
    response = await api.anonymous.get(path, headers={**headers, "Host": host})
    assert response.status_code in (200, 401)


@pytest.mark.parametrize(
    ("name", "local"),
    [
        pytest.param("localhost", True, id="localhost"),
        pytest.param("kiln.localhost", True, id="sub-localhost"),
        pytest.param("127.0.0.2", True, id="loopback"),
        pytest.param("[::1]", True, id="ipv6"),
        pytest.param("192.168.1.5", False, id="lan"),
        pytest.param("kiln.example.com", False, id="domain"),
        pytest.param("localhost.example.com", False, id="lookalike"),
    ],
)
def test_local_names(name: str, local: bool) -> None:
    assert is_local_name(name) is local


@pytest.mark.parametrize(
    ("public_host", "shared"),
    [
        pytest.param("kiln.localhost", True, id="kiln-localhost"),
        pytest.param("kiln.example.com", True, id="domain"),
        pytest.param("localhost", False, id="single-label"),
        pytest.param("127.0.0.1", False, id="address"),
    ],
)
def test_previews_share_the_site_of_a_name_with_a_dot(public_host: str, shared: bool) -> None:
    assert previews_share_its_site(public_host) is shared
