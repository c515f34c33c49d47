"""``kiln run``/``kiln sandbox`` on a server's data dir: its instance and its embedded Redis."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from app.cli.local_sandbox import cli_sandbox_settings
from sandbox.settings import SandboxSettings, instance_for


def _record(data_dir: Path, url: str) -> None:
    """What a ``kiln serve`` on ``data_dir`` writes for its embedded Redis."""
    (data_dir / "redis").mkdir(parents=True)
    (data_dir / "redis" / "url").write_text(url + "\n")


def test_a_running_servers_redis_and_instance_are_used(tmp_path: Path) -> None:
    sock = tmp_path / "redis" / "redis.sock"
    _record(tmp_path, f"unix://{sock}?db=0")
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(sock))  # the socket a live server has
        settings = cli_sandbox_settings(tmp_path, {})
    assert settings.redis_url == f"unix://{sock}?db=0"
    assert settings.instance == instance_for(tmp_path)


@pytest.mark.parametrize(
    "env",
    [
        pytest.param({"REDIS_URL": "redis://127.0.0.1:1/3"}, id="redis-url-wins"),
        pytest.param({}, id="stopped-server"),
    ],
)
def test_otherwise_the_configured_redis(tmp_path: Path, env: dict[str, str]) -> None:
    _record(tmp_path, f"unix://{tmp_path / 'redis' / 'redis.sock'}?db=0")  # no socket: stopped
    settings = cli_sandbox_settings(tmp_path, env)
    expected = env.get("REDIS_URL", SandboxSettings().redis_url)
    assert (settings.redis_url, settings.instance) == (expected, instance_for(tmp_path))


def test_the_data_dir_comes_from_the_environment_without_the_option(tmp_path: Path) -> None:
    settings = cli_sandbox_settings(None, {"KILN_DATA_DIR": str(tmp_path)})
    assert settings.instance == instance_for(tmp_path)
