"""Workspace listing and reading: the commands and the parser (the Docker side is in
``tests/api/test_sandboxes.py``, through HTTP)."""

from __future__ import annotations

import pytest

from parser.errors import UnsafePathError
from sandbox.execution.workspace_files import (
    MAX_LISTED,
    MAX_READ_BYTES,
    WorkspaceFile,
    find_argv,
    parse_listing,
    read_argv,
)


def test_find_prunes_the_heavy_folders_and_prints_sizes_and_paths() -> None:
    argv = find_argv()
    assert argv[:2] == ["find", "/workspace"]
    for name in ("node_modules", "dist", ".git", ".next", ".kiln"):
        assert argv[argv.index(name) - 1] == "-name"
    assert argv[-2:] == ["-printf", "%s %P\\0"]


def test_parse_listing_keeps_odd_names_and_sorts() -> None:
    output = b"12 src/b.js\x003 a file with spaces\x000 weird\nname\x00"
    assert parse_listing(output) == [
        WorkspaceFile("a file with spaces", 3),
        WorkspaceFile("src/b.js", 12),
        WorkspaceFile("weird\nname", 0),
    ]


def test_parse_listing_skips_garbage_and_caps_the_count() -> None:
    many = b"".join(f"1 f{n:05d}\x00".encode() for n in range(MAX_LISTED + 10))
    assert len(parse_listing(many + b"garbage\x00")) == MAX_LISTED
    assert parse_listing(b"") == []


def test_read_argv_names_the_normalized_workspace_path_and_the_limit() -> None:
    argv = read_argv("./src/../index.html")
    assert argv[:2] == ["node", "-e"]
    assert argv[-2:] == ["/workspace/index.html", str(MAX_READ_BYTES)]


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("../etc/shadow", id="parent"),
        pytest.param("/etc/shadow", id="absolute"),
    ],
)
def test_read_argv_refuses_a_path_outside_the_workspace(path: str) -> None:
    with pytest.raises(UnsafePathError):
        read_argv(path)
