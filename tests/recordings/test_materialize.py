"""Tests for app.recordings.materialize: writing a stream's files into a folder and never outside
it."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.recordings.materialize import MaterializeError, materialize


def test_writes_files_in_nested_folders(tmp_path: Path) -> None:
    root = tmp_path / "out"

    report = materialize({"src/App.jsx": "é\n", "README.md": "# hi\n"}, root)

    assert (root / "src" / "App.jsx").read_text(encoding="utf-8") == "é\n"
    assert (root / "README.md").read_text() == "# hi\n"
    assert report.written == [("src/App.jsx", 3), ("README.md", 5)]
    assert report.refused == []


def test_paths_are_normalized_again(tmp_path: Path) -> None:
    report = materialize({"src/./lib//a.js": "a"}, tmp_path)

    assert report.written == [("src/lib/a.js", 1)]
    assert (tmp_path / "src" / "lib" / "a.js").read_text() == "a"


def test_overwrites_an_existing_file(tmp_path: Path) -> None:
    (tmp_path / "a.js").write_text("old content")

    materialize({"a.js": "new"}, tmp_path)

    assert (tmp_path / "a.js").read_text() == "new"


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        pytest.param("../escape.js", "escapes the workspace", id="parent"),
        pytest.param("src/../../escape.js", "escapes the workspace", id="nested-parent"),
        pytest.param("/tmp/absolute.js", "absolute file path", id="absolute"),
        pytest.param("C:\\evil.js", "absolute file path", id="drive"),
        pytest.param("a\x00b.js", "control characters", id="nul"),
    ],
)
def test_unsafe_paths_are_refused_and_the_rest_written(
    tmp_path: Path, path: str, reason: str
) -> None:
    root = tmp_path / "out"

    report = materialize({path: "evil", "ok.js": "fine"}, root)

    assert report.written == [("ok.js", 4)]
    assert [p for p, _ in report.refused] == [path]
    assert reason in report.refused[0][1]
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["ok.js", "out"]


def test_symlinked_folder_leading_outside_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "out"
    root.mkdir()
    (root / "src").symlink_to(outside)

    report = materialize({"src/deep/App.jsx": "x", "src/App.jsx": "y"}, root)

    assert report.written == []
    assert [p for p, _ in report.refused] == ["src/deep/App.jsx", "src/App.jsx"]
    assert "through a symlink" in report.refused[0][1]
    assert list(outside.iterdir()) == []


def test_symlinked_file_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "secret.txt"
    target.write_text("keep me")
    root = tmp_path / "out"
    root.mkdir()
    (root / "a.js").symlink_to(target)

    report = materialize({"a.js": "overwritten?"}, root)

    assert report.written == []
    assert "symlink" in report.refused[0][1]
    assert target.read_text() == "keep me"


def test_symlink_inside_the_folder_to_the_folder_is_fine(tmp_path: Path) -> None:
    root = tmp_path / "out"
    (root / "real").mkdir(parents=True)
    (root / "alias").symlink_to(root / "real")

    report = materialize({"alias/a.js": "a"}, root)

    assert report.written == [("alias/a.js", 1)]
    assert (root / "real" / "a.js").read_text() == "a"


def test_root_reached_through_a_symlink_is_allowed(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)

    report = materialize({"a.js": "a"}, link)

    assert report.written == [("a.js", 1)]
    assert (real / "a.js").read_text() == "a"


def test_a_folder_where_a_file_should_go_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.js").mkdir()

    report = materialize({"a.js": "a"}, tmp_path)

    assert [p for p, _ in report.refused] == ["a.js"]


def test_root_that_is_a_file_raises(tmp_path: Path) -> None:
    root = tmp_path / "file"
    root.write_text("")

    with pytest.raises(MaterializeError, match="cannot create the folder"):
        materialize({"a.js": "a"}, root)
