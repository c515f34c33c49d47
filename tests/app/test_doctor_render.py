"""``kiln doctor``'s render check row: off, missing image, and the real browser starting."""

from __future__ import annotations

from typing import Any

import docker
import docker.errors
import pytest

from app.cli.doctor_render import check_render

pytestmark = pytest.mark.anyio


async def test_off_passes_and_says_so() -> None:
    result = await check_render(None, {"KILN_RENDER_CHECK": "0"})
    assert result.ok
    assert "KILN_RENDER_CHECK=0" in result.detail


async def test_a_bad_setting_fails_naming_it() -> None:
    result = await check_render(None, {"KILN_RENDER_CHECK_TIMEOUT": "nope"})
    assert not result.ok
    assert "KILN_RENDER_CHECK_TIMEOUT" in result.detail


class _NoImage:
    class containers:  # noqa: N801  # the SDK's attribute name
        @staticmethod
        def create(**kwargs: Any) -> Any:
            raise docker.errors.ImageNotFound("no such image")


async def test_a_missing_image_fails_with_its_code_and_a_hint() -> None:
    client: Any = _NoImage()
    result = await check_render(client, {})
    assert not result.ok
    assert result.detail.startswith("render_check_image_missing:")
    assert "kiln images build" in result.hint


@pytest.mark.docker
async def test_the_real_browser_starts_confined() -> None:
    client = docker.from_env()
    try:
        result = await check_render(client, {"KILN_INSTANCE": "kiln-test-doctor-render"})
    finally:
        client.close()
    assert result.ok, result
