"""Reading a workspace tar into project files: regular files only, safe paths only, sources only.
(Reading and writing a real sandbox is in ``test_restore_end_to_end``.)"""

from __future__ import annotations

import io
import tarfile

import pytest

from app.projects.errors import ProjectError
from app.projects.workspace_io import MARKER, tar_argv, workspace_snapshot, write_workspace

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
    assert "--exclude=.kiln" not in tar_argv()


def test_the_ignored_folders_never_leave_the_container() -> None:
    argv = tar_argv()
    assert argv[:3] == ["tar", "-cf", "-"]
    assert {"--exclude=node_modules", "--exclude=dist", "--exclude=.next"} <= set(argv)
    assert argv[-3:] == ["-C", "/workspace", "."]


@pytest.mark.parametrize(
    "path", [pytest.param("../x", id="climbs"), pytest.param("/etc/x", id="absolute")]
)
async def test_writing_outside_the_workspace_is_refused(path: str) -> None:
    with pytest.raises(ProjectError, match="outside the workspace"):
        await write_workspace(object(), {path: b"x"})
    with pytest.raises(ProjectError, match="outside the workspace"):
        await write_workspace(object(), {}, [path])
