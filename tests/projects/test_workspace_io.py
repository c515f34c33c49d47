"""Reading a workspace tar into project files: regular files only, safe paths only, sources only.
(Reading and writing a real sandbox is in ``test_restore_end_to_end``.)"""

from __future__ import annotations

import io
import tarfile

import pytest

from app.projects.errors import ProjectError
from app.projects.workspace_io import (
    MARKER,
    find_expression,
    listing_argv,
    parse_listing,
    tar_argv,
    workspace_snapshot,
    write_workspace,
)

pytestmark = pytest.mark.anyio


def workspace_tar() -> bytes:
    """What ``tar -cf - -C /workspace .`` gives for a workspace with traps in it."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:

        def add(
            name: str, content: bytes = b"", kind: bytes = tarfile.REGTYPE, link: str = ""
        ) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.linkname, info.size = kind, link, len(content)
            tar.addfile(info, io.BytesIO(content) if content else None)

        add("./", kind=tarfile.DIRTYPE)
        add("./src", kind=tarfile.DIRTYPE)
        add("./src/App.jsx", b"app")
        add("./package.json", b"{}")
        add("./secret", kind=tarfile.SYMTYPE, link="/etc/passwd")
        add("./src/alias.jsx", kind=tarfile.SYMTYPE, link="App.jsx")
        add("./hard", kind=tarfile.LNKTYPE, link="./package.json")
        add("../escape.txt", b"x")
        add("./node_modules/react/index.js", b"react")
        add("./dist/index.html", b"built")
        add("./debug.log", b"log")
        add("./.kiln", kind=tarfile.DIRTYPE)
        add(f"./{MARKER}", b"abc123\n")
    return out.getvalue()


def test_only_regular_source_files_at_safe_paths_are_taken() -> None:
    snapshot = workspace_snapshot(workspace_tar())
    assert snapshot.files == {"src/App.jsx": b"app", "package.json": b"{}"}


def test_the_marker_names_the_version_and_is_no_project_file() -> None:
    assert workspace_snapshot(workspace_tar()).marker == "abc123"


def test_the_ignored_folders_and_files_never_leave_the_container() -> None:
    """The listing and the archive name the same files: ignored folders pruned, ignored file
    names left out, in one expression."""
    expression = find_expression()
    pruned = expression[: expression.index("-prune")]
    assert {"node_modules", "dist", ".next", ".kiln"} <= set(pruned)
    assert expression[-15:-12] == ["!", "-name", "*.log"]
    assert listing_argv()[4:] == tar_argv()[4:] == expression


def test_a_listing_gives_the_marker_and_the_sizes_of_source_files() -> None:
    listing = (
        b"abc123\n\0"
        b"12 src/App.jsx\0"
        b"7 name with spaces.txt\0"
        b"5 ../escape\0"
        b"9 a\\b.js\0"
        b"3 node_modules/x/index.js\0"
        b"x broken\0"
    )
    marker, sizes = parse_listing(listing)
    assert marker == "abc123"
    assert sizes == {"src/App.jsx": 12, "name with spaces.txt": 7}
    assert parse_listing(b"\0") == (None, {})


@pytest.mark.parametrize(
    "cut",
    [
        pytest.param(slice(0, 3000), id="cut-in-a-file"),
        pytest.param(slice(0, 100), id="cut-in-a-header"),
        pytest.param(slice(10, None), id="misaligned"),
    ],
)
def test_a_broken_archive_is_refused_in_words(cut: slice) -> None:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        info = tarfile.TarInfo("./src/big.js")
        info.size = 5000
        tar.addfile(info, io.BytesIO(b"x" * info.size))
    with pytest.raises(ProjectError, match="the workspace's archive cannot be read: "):
        workspace_snapshot(out.getvalue()[cut])


@pytest.mark.parametrize(
    "path", [pytest.param("../x", id="climbs"), pytest.param("/etc/x", id="absolute")]
)
async def test_writing_outside_the_workspace_is_refused(path: str) -> None:
    with pytest.raises(ProjectError, match="outside the workspace"):
        await write_workspace(object(), {path: b"x"})
    with pytest.raises(ProjectError, match="outside the workspace"):
        await write_workspace(object(), {}, [path])
