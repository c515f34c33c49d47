"""``kiln user create|token``: a user and an API token shown once, in the data dir's store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from app.config import ServiceSettings
from app.store import Store


def open_store(data_dir: Path) -> Store:
    settings = ServiceSettings.from_env({"KILN_DATA_DIR": str(data_dir)})
    return Store(settings.database_path, settings.secret_key)


@pytest.fixture(autouse=True)
def no_secret_from_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KILN_SECRET_KEY", raising=False)


def test_create_prints_a_working_token_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["user", "create", "ada", "--data-dir", str(tmp_path), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    store = open_store(tmp_path)
    user = store.user_for_token(printed["token"], "api")
    store.close()
    assert user is not None
    assert printed["user"] == {"id": user.id, "name": "ada"}


def test_token_issues_another_token(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["user", "create", "ada", "--data-dir", str(tmp_path), "--json"])
    first = json.loads(capsys.readouterr().out)["token"]
    assert main(["user", "token", "ada", "--data-dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    second = text.split("API token (shown once): ", 1)[1].strip()
    store = open_store(tmp_path)
    both = [store.user_for_token(token, "api") for token in (first, second)]
    store.close()
    assert second != first
    assert [user.name if user else None for user in both] == ["ada", "ada"]


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        pytest.param(["create", "ada"], 1, "exists already", id="duplicate"),
        pytest.param(["token", "nobody"], 1, "no user named 'nobody'", id="unknown"),
        pytest.param(["create", "../x"], 2, "not a valid user name", id="bad-name"),
        pytest.param(["create", ""], 2, "not a valid user name", id="empty-name"),
    ],
)
def test_refusals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str
) -> None:
    main(["user", "create", "ada", "--data-dir", str(tmp_path)])
    capsys.readouterr()
    assert main(["user", *argv, "--data-dir", str(tmp_path)]) == code
    assert message in capsys.readouterr().err
