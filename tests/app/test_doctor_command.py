"""``kiln doctor``: every check on this machine, and failing checks with their hints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from app.cli.doctor_command import CheckResult, check_data_dir, check_redis, format_result
from tests.app.kiln_process import TIKTOKEN_CACHE, free_port

pytestmark = [pytest.mark.docker]


def run_doctor(capsys: pytest.CaptureFixture[str], data_dir: Path) -> tuple[int, dict[str, bool]]:
    code = main(["doctor", "--data-dir", str(data_dir), "--json"])
    report = json.loads(capsys.readouterr().out)
    return code, {check["name"]: check["ok"] for check in report["checks"]}


def test_everything_passes_on_a_set_up_machine(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    redis_url: str,
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(TIKTOKEN_CACHE))
    monkeypatch.setenv("REDIS_URL", redis_url)
    code, checks = run_doctor(capsys, tmp_path / "data")
    assert checks == {
        "data dir": True,
        "redis": True,
        "docker": True,
        "image base": True,
        "image vite-react": True,
        "image vanilla": True,
        "image nextjs": True,
        "tokenizer": True,
    }
    assert code == 0


def test_failing_checks_exit_1_with_hints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{free_port()}/0")
    code = main(["doctor", "--data-dir", str(tmp_path / "data")])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL  redis " in out
    assert "FAIL  tokenizer " in out
    assert "hint: point TIKTOKEN_CACHE_DIR" in out
    assert "ok    docker " in out


def test_an_unwritable_data_dir_fails(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = check_data_dir(blocker / "data")
    assert not result.ok
    assert "KILN_DATA_DIR" in result.hint


def test_without_redis_url_the_binary_is_enough(tmp_path: Path) -> None:
    result = check_redis(None, tmp_path)
    assert result.ok
    assert "redis-server" in result.detail


def test_format() -> None:
    assert (
        format_result(CheckResult("docker", True, "engine 27")) == f"ok    {'docker':<16} engine 27"
    )
    failed = format_result(CheckResult("redis", False, "down", "start it"))
    assert failed.splitlines() == [f"FAIL  {'redis':<16} down", f"{'':23}hint: start it"]
