"""Reading a workspace into project files: regular files only, safe paths only, sources only;
bounded by the cap before and while reading. The end of the module reads a real sandbox image's
workspace holding 1 GB (runs end to end are in ``test_restore_end_to_end``)."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from app.projects.errors import ProjectError, ProjectTooLarge
from app.projects.git_store import GitProjectStore
from app.projects.store import VersionInfo
from app.projects.sync import ProjectSync
from app.projects.workspace_io import (
    MARKER,
    SANDBOX_USER,
    find_expression,
    listing_argv,
    parse_listing,
    read_workspace,
    tar_argv,
    workspace_snapshot,
    write_workspace,
)
from tests.sandbox.docker_support import bare_sandbox_container, wait_until_gone

pytestmark = pytest.mark.anyio
NOT_UTF8 = b"./src/latin-1 \xe9t\xe9.js".decode("utf-8", "surrogateescape")  # how tar reads it


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
        add("./lost-link", kind=tarfile.LNKTYPE, link="./node_modules/gone.js")
        add("./fifo", kind=tarfile.FIFOTYPE)
        add('./src/odd "name"\\\twith\nbreaks.js', b"odd")
        add(NOT_UTF8, b"bytes")
        add("../escape.txt", b"x")
        add("./node_modules/react/index.js", b"react")
        add("./dist/index.html", b"built")
        add("./debug.log", b"log")
        add("./.kiln", kind=tarfile.DIRTYPE)
        add(f"./{MARKER}", b"abc123\n")
    return out.getvalue()


def test_only_files_at_safe_paths_are_taken_and_the_rest_is_named() -> None:
    snapshot = workspace_snapshot(workspace_tar())
    assert snapshot.files == {
        "src/App.jsx": b"app",
        "package.json": b"{}",
        "hard": b"{}",
        'src/odd "name"\\\twith\nbreaks.js': b"odd",
    }
    assert snapshot.skipped == {
        "secret": "it is a symbolic link",
        "src/alias.jsx": "it is a symbolic link",
        "lost-link": "it cannot be read",
        "fifo": "it is not a regular file",
        NOT_UTF8.removeprefix("./"): "its name is not UTF-8",
    }


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
    # a backslash is a file name's own character (versions keep any name but NUL)
    assert sizes == {"src/App.jsx": 12, "name with spaces.txt": 7, "a\\b.js": 9}
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


GIGABYTE = 2**30
CAP = 50 * 2**20


@pytest.fixture(scope="module")
def huge_workspace() -> Iterator[Any]:
    """A sandbox image's workspace with 1 GB in one file (made at once: ``fallocate``), a
    folder named like an ignored file, a log and installed packages."""
    with bare_sandbox_container() as container:
        script = (
            "cd /workspace && fallocate -l 1G big.bin && mkdir -p notes.log node_modules/x "
            "&& echo keep > notes.log/a.js && echo drop > debug.log && echo m > node_modules/x/i.js"
        )
        code, output = container.exec_run(["sh", "-c", script], user=SANDBOX_USER)
        assert code == 0, output
        yield container


@pytest.mark.docker
async def test_a_workspace_over_the_cap_is_refused_before_it_is_read(huge_workspace: Any) -> None:
    with pytest.raises(ProjectTooLarge, match=r"largest: 'big.bin' \(1073741824 bytes\)"):
        await read_workspace(huge_workspace, CAP)
    listed = await read_workspace(huge_workspace, CAP, whole=False)
    assert not listed.complete
    assert listed.files == {}
    assert listed.sizes["big.bin"] == GIGABYTE
    assert listed.sizes["notes.log/a.js"] == 5  # a folder named like a log is no log
    assert "debug.log" not in listed.sizes
    assert "node_modules/x/i.js" not in listed.sizes


@pytest.mark.docker
async def test_a_cancelled_read_stops_tar_in_the_container(huge_workspace: Any) -> None:
    with anyio.move_on_after(1.0) as scope:
        await read_workspace(huge_workspace, 2 * GIGABYTE)  # would read the whole gigabyte
    assert scope.cancelled_caught
    await wait_until_gone(huge_workspace, "tar")


@pytest.mark.docker
async def test_a_restore_takes_a_workspace_over_the_cap_back_to_the_version(
    huge_workspace: Any, tmp_path: Path
) -> None:
    """The way out of a huge workspace: the version is written whole, the rest removed."""
    store = GitProjectStore(tmp_path / "projects")
    version = {"index.html": b"<p>v1</p>\n", "src/main.js": b"main\n"}
    store.commit("chat", version, VersionInfo(note="v1"))

    class Containers:
        async def container_for(self, sandbox_id: str) -> Any:
            return huge_workspace

    sync = ProjectSync(store, Containers(), "chat", max_bytes=CAP)
    await sync.restore("sandbox", 1)
    after = await read_workspace(huge_workspace, CAP)
    assert after.files == version
    assert after.marker == store.versions("chat")[-1].id
