"""``kiln project push|import`` on a data directory, against a real git http-backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli import main
from app.config import ServiceSettings
from app.projects.git_store import GitProjectStore
from app.projects.store import VersionInfo
from app.store import Store
from tests.projects.git_http import GitServer, git, git_server

TOKEN = "cli-token-0123456789abcdef"
V1 = {"index.html": b"<h1>one</h1>\n"}
V2 = {"index.html": b"<h1>two</h1>\n", "style.css": b"h1{}\n"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[GitServer]:
    root = tmp_path / "served"
    root.mkdir()
    with git_server(root, token=TOKEN) as running:
        running.bare("app")
        yield running


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def store(data_dir: Path) -> Store:
    settings = ServiceSettings.from_env({"KILN_DATA_DIR": str(data_dir)})
    return Store(settings.database_path, settings.secret_key)


def kiln(data_dir: Path, *args: str) -> int:
    return main(["project", *args, "--data-dir", str(data_dir)])


def test_push_then_import_round_trips_the_files(
    server: GitServer, data_dir: Path, store: Store, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    user = store.create_user("ann")
    chat = store.create_chat(user.id, "mine")
    projects = GitProjectStore(data_dir / "projects")
    projects.commit(chat.id, V1, VersionInfo(turn=1))
    projects.commit(chat.id, V2, VersionInfo(turn=2))
    monkeypatch.setenv("GIT_TOKEN_FOR_TEST", TOKEN)
    url = server.url("app")
    assert kiln(data_dir, "push", chat.id, "--url", url, "--token-env", "GIT_TOKEN_FOR_TEST") == 0
    assert f"version 2 pushed: {url} (main)" in capsys.readouterr().out
    assert git(server.root / "app.git", "rev-list", "--count", "main").strip() == "2"
    assert kiln(data_dir, "push", chat.id) == 0  # the stored remote and token
    assert "version 2 already there" in capsys.readouterr().out
    stored = store.chat_remote(chat.id)
    assert stored is not None
    assert stored.last_push is not None
    assert stored.last_push["outcome"] == "up_to_date"

    assert kiln(data_dir, "import", url, "--user", "ann", "--token-env", "GIT_TOKEN_FOR_TEST") == 0
    said = capsys.readouterr().out
    assert "template vanilla" in said
    imported = [c for c in store.list_chats(user.id) if c.id != chat.id]
    assert [c.title for c in imported] == ["app"]
    files = projects.files(imported[0].id, 1)
    assert {path: files[path] for path in V2} == V2
    assert set(files) == {*V2, "package.json", "server.js"}  # vanilla's files serve the site
    assert b'"dev": "node server.js"' in files["package.json"]


def test_a_refused_push_says_why_and_keeps_it(
    server: GitServer, data_dir: Path, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = store.create_chat(store.create_user("ann").id, "mine")
    GitProjectStore(data_dir / "projects").commit(chat.id, V1, VersionInfo(turn=1))
    assert kiln(data_dir, "push", chat.id, "--url", server.url("app")) == 1
    assert "refused the credentials" in capsys.readouterr().err
    stored = store.chat_remote(chat.id)
    assert stored is not None
    assert stored.last_push is not None
    assert stored.last_push["code"] == "remote_auth_failed"


def test_an_import_refused_leaves_no_chat(
    server: GitServer, data_dir: Path, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    user = store.create_user("ann")
    assert kiln(data_dir, "import", "file:///etc", "--user", "ann") == 1
    assert "not a network git URL" in capsys.readouterr().err
    assert kiln(data_dir, "import", server.url("absent"), "--user", "ann") == 1
    assert store.list_chats(user.id) == []
