"""Signing in to a real ``kiln serve``: start-up prints the link in a box, and ``kiln login-url``
prints a fresh one while the server runs (no restart), which signs a new browser in."""

from __future__ import annotations

import os
import subprocess

from playwright.sync_api import Browser

from tests.app.kiln_process import kiln_script
from tests.web.conftest import desktop_context, sign_in
from tests.web.kiln_service import KilnService


def test_start_up_prints_the_link_in_a_box(kiln: KilnService) -> None:
    at = next(i for i, line in enumerate(kiln.lines) if kiln.login_url in line)
    assert kiln.lines[at - 2].startswith("+---")
    assert "Open this link to sign in" in kiln.lines[at - 1]
    assert "kiln login-url" in kiln.lines[at + 1]


def test_kiln_login_url_signs_in_without_a_restart(browser: Browser, kiln: KilnService) -> None:
    port = kiln.base_url.rsplit(":", 1)[1]
    data_dir = kiln.log.parent / "data"
    env = {**os.environ, "KILN_PUBLIC_HOST": "kiln.localhost"}
    argv = [str(kiln_script()), "login-url", "--data-dir", str(data_dir), "--port", port, "--plain"]
    printed = subprocess.run(argv, env=env, capture_output=True, text=True, check=True, timeout=60)
    url = printed.stdout.strip()
    assert url.startswith(f"{kiln.base_url}/login?token=")
    assert url != kiln.login_url
    context = desktop_context(browser)
    try:
        sign_in(context.new_page(), url)
    finally:
        context.close()
