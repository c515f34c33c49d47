"""``kiln project publish|unpublish`` on a data directory with a real store, git projects and
build storage, the sandbox manager on real Docker and Redis (a vanilla version: no build
sandbox; the Vite build is tests/publish/test_build's)."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from app.cli import main
from app.config import ServiceSettings
from app.projects.git_store import GitProjectStore
from app.projects.store import VersionInfo
from app.publish.storage import LocalBuildStorage
from app.store import Store

pytestmark = pytest.mark.docker
EXPECT_CLEAN = True
SECRET = "a-test-secret-of-some-length"
LINK = re.compile(r"http://([a-z2-7]{16})\.apps\.kiln\.localhost:8000/")


@pytest.fixture
def chat(instance: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A chat with two vanilla versions in the data directory ``tmp_path``."""
    monkeypatch.setenv("KILN_SECRET_KEY", SECRET)
    monkeypatch.delenv("KILN_PUBLIC_HOST", raising=False)
    monkeypatch.delenv("KILN_PORT", raising=False)
    store = Store(tmp_path / "kiln.db", SECRET)
    chat_id = store.create_chat(store.create_user("ann").id, "site").id
    store.close()
    projects = GitProjectStore(tmp_path / "projects")
    projects.commit(chat_id, {"index.html": b"one"}, VersionInfo("r1", 1))
    projects.commit(chat_id, {"index.html": b"two"}, VersionInfo("r2", 1))
    return chat_id


def kiln(data_dir: Path, *args: str) -> int:
    """``kiln project ARGS`` in a thread of its own (the CLI runs its own event loop)."""
    argv = ["project", *args, "--data-dir", str(data_dir)]
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(main, argv).result()


def served(data_dir: Path, chat_id: str) -> bytes | None:
    settings = ServiceSettings.from_env({"KILN_DATA_DIR": str(data_dir), "KILN_SECRET_KEY": SECRET})
    store = Store(settings.database_path, SECRET)
    row = store.publication(chat_id)
    store.close()
    storage = LocalBuildStorage(settings.published_dir)
    manifest = storage.manifest(row.manifest) if row and row.manifest else None
    return storage.blob(manifest.files["index.html"].digest) if manifest else None


def test_publish_prints_the_link_and_unpublish_takes_it_down(
    chat: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert kiln(tmp_path, "publish", chat, "1") == 0
    first = LINK.search(capsys.readouterr().out)
    assert first is not None
    assert served(tmp_path, chat) == b"one"
    assert kiln(tmp_path, "publish", chat) == 0  # latest
    out = capsys.readouterr().out
    assert out.startswith("version 2 published at ")
    assert first.group(0) in out  # the same link
    assert served(tmp_path, chat) == b"two"
    assert kiln(tmp_path, "unpublish", chat) == 0
    assert capsys.readouterr().out.strip() == f"{first.group(0)} no longer serves the app"
    assert served(tmp_path, chat) is None


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        pytest.param(("publish", "nochat"), 1, "no chat 'nochat'", id="unknown-chat"),
        pytest.param(("publish", "{chat}", "v2"), 2, "no version 'v2'", id="bad-version"),
        pytest.param(("publish", "{chat}", "9"), 1, "9", id="missing-version"),
        pytest.param(("unpublish", "{chat}"), 1, "not published", id="not-published"),
    ],
)
def test_failures_are_said_in_words(
    chat: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: tuple[str, ...],
    code: int,
    words: str,
) -> None:
    assert kiln(tmp_path, *(arg.format(chat=chat) for arg in args)) == code
    assert words in capsys.readouterr().err
