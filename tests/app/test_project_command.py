"""``kiln project log|diff|restore|export`` on a real git project store in a data directory."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from app.cli import main
from app.projects.git_store import GitProjectStore
from app.projects.store import VersionInfo

V1 = {"index.html": b"<h1>one</h1>\n"}
V2 = {"index.html": b"<h1>two</h1>\n", "style.css": b"h1{}\n"}
CHAT = "chat1"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data directory whose chat ``chat1`` has two versions."""
    projects = GitProjectStore(tmp_path / "projects")
    projects.commit(CHAT, V1, VersionInfo("run1", 1))
    projects.commit(CHAT, V2, VersionInfo("run2", 2, "post-generation fixes"))
    return tmp_path


def kiln(data_dir: Path, *args: str) -> int:
    return main(["project", *args, "--data-dir", str(data_dir)])


def test_log_lists_the_versions(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert kiln(data_dir, "log", CHAT) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert lines[0].strip().startswith("1 ")
    assert lines[0].endswith("run run1 turn 1  1 added, 0 changed, 0 removed")
    assert lines[1].endswith(
        "run run2 turn 2 (post-generation fixes)  1 added, 1 changed, 0 removed"
    )


def test_log_as_json(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert kiln(data_dir, "log", CHAT, "--json") == 0
    versions = json.loads(capsys.readouterr().out)
    assert [v["version"] for v in versions] == [1, 2]


def test_diff_prints_the_unified_diff(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert kiln(data_dir, "diff", CHAT, "2") == 0
    out = capsys.readouterr().out
    assert "-<h1>one</h1>\n+<h1>two</h1>\n" in out
    assert "+++ b/style.css" in out


def test_restore_records_a_new_version(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert kiln(data_dir, "restore", CHAT, "1") == 0
    assert capsys.readouterr().out.strip() == "version 1 restored as version 3"
    projects = GitProjectStore(data_dir / "projects")
    assert projects.files(CHAT, "latest") == V1
    assert len(projects.versions(CHAT)) == 3


def test_export_writes_a_zip(data_dir: Path, tmp_path: Path) -> None:
    output = tmp_path / "out.zip"
    assert kiln(data_dir, "export", CHAT, "-o", str(output)) == 0
    with zipfile.ZipFile(io.BytesIO(output.read_bytes())) as archive:
        assert {name: archive.read(name) for name in archive.namelist()} == V2
    assert not output.with_name("out.zip.partial").exists()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        pytest.param(("diff", CHAT, "7"), "has no version '7'", id="unknown-version"),
        pytest.param(("restore", "nochat", "1"), "has no version '1'", id="unknown-chat"),
        pytest.param(("log", "../etc"), "not a chat id: '../etc'", id="not-a-chat-id"),
    ],
)
def test_failures_end_in_words(
    data_dir: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], words: str
) -> None:
    assert kiln(data_dir, *args) == 1
    error = capsys.readouterr().err
    assert error.startswith(f"kiln project {args[0]}: ")
    assert words in error


def test_a_chat_without_versions(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert kiln(data_dir, "log", "other") == 0
    assert capsys.readouterr().out.strip() == "the chat 'other' has no versions yet"
