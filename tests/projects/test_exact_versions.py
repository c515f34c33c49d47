"""Versions keep exactly the files, on real git and real sandboxes.

The app wrote a ``.gitattributes`` that would convert, filter and expand on the way out of git
(``* text eol=crlf``, ``*.css filter=x``, ``ident``, ``export-ignore``, ``export-subst``) and
files named with quotes, backslashes, tabs and newlines. Its sandbox is recorded as a version,
restored into itself (an identity restore changes nothing: it once came back "0 added,
3 changed, 1 removed" and broke the build), restored into a new sandbox and zipped: every file
comes back byte for byte, each read on its own through Docker's archive API (not through the
workspace reader under test), and the restored app still builds. A symlink, which no version
keeps, is named to the user.
"""

from __future__ import annotations

import io
import tarfile
import zipfile
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from app.projects.git_store import GitProjectStore
from app.projects.store import VersionInfo
from app.projects.sync import ProjectSync
from app.projects.workspace_io import SANDBOX_USER, read_workspace, write_workspace
from sandbox import call
from sandbox.containers.archives import read_archive
from sandbox.lifecycle.manager import SandboxManager
from sandbox.settings import SandboxSettings
from tests.sandbox.docker_support import manager_on, settings_for, swept_instance

pytestmark = [pytest.mark.anyio, pytest.mark.docker, pytest.mark.slow]

CHAT = "exact"
TEMPLATE = "vite-react"
ATTRIBUTES = (
    b"* text eol=crlf\n*.css filter=x\n* ident\nsrc/notes.txt export-ignore\n"
    b"src/stamp.js export-subst\n"
)
WRITTEN = {  # what the app wrote beside the template's files
    ".gitattributes": ATTRIBUTES,
    "src/ident.js": b"// $Id$\nexport const ident = 1;\n",
    "src/stamp.js": b"// $Format:%H$\nexport const stamp = 1;\n",
    "src/notes.txt": b"kept in every version\n",
    "src/extra.css": b"h1 { color: red }\n",
    "src/windows.txt": b"already\r\ncrlf\r\n",
    'src/say "hi".txt': b"quotes\n",
    "src/back\\slash.txt": b"backslash\n",
    "src/tab\there.txt": b"tab\n",
    "src/new\nline.txt": b"newline\n",
    '"leading quote and \\ and \t and \n.md': b"all of them\n",
}


class Records:
    """What the sync told the user."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, kind: str, record: Mapping[str, Any]) -> None:
        self.seen.append((kind, dict(record)))


@pytest.fixture
def settings(redis_url: str) -> Iterator[SandboxSettings]:
    with swept_instance("test-exact", redis_url) as instance:
        yield settings_for(instance, redis_url)


@pytest.fixture
async def manager(settings: SandboxSettings) -> AsyncIterator[SandboxManager]:
    async with manager_on(settings) as opened:
        yield opened


async def file_bytes(container: Any, path: str) -> bytes:
    """One workspace file, read through Docker's archive API."""
    data = await read_archive(container, f"/workspace/{path}")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = tar.next()
        assert member is not None, path
        assert member.isreg(), path
        extracted = tar.extractfile(member)
        assert extracted is not None
        return extracted.read()


async def sandbox_files(container: Any, paths: Mapping[str, bytes]) -> dict[str, bytes]:
    return {path: await file_bytes(container, path) for path in paths}


def zipped(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


async def test_restore_and_zip_give_back_every_file_byte_for_byte(
    manager: SandboxManager, tmp_path: Path
) -> None:
    store, records = GitProjectStore(tmp_path / "projects"), Records()
    sync = ProjectSync(store, manager, CHAT)
    first = await manager.acquire(CHAT, "owner", TEMPLATE)
    container = await manager.container_for(first.id)
    await write_workspace(container, WRITTEN)
    link = ["ln", "-s", "App.jsx", "/workspace/src/alias.jsx"]
    await call(container.exec_run, link, user=SANDBOX_USER)
    project = (await read_workspace(container)).files
    assert WRITTEN.items() <= project.items()

    recorded = await sync.record(first.id, VersionInfo("run1", 1), records)
    assert recorded is not None
    assert store.files(CHAT, 1) == project
    assert await sandbox_files(container, project) == project
    assert zipped(store.archive(CHAT, 1)) == project
    warnings = [record for kind, record in records.seen if kind == "warning"]
    assert [(w["code"], w["paths"]) for w in warnings] == [("file_not_kept", ["src/alias.jsx"])]

    source, identity, _ = await sync.restore(first.id, 1)
    assert (source.number, identity.summary) == (1, "0 added, 0 changed, 0 removed")
    assert await sandbox_files(container, project) == project
    assert store.files(CHAT, "latest") == project

    second = await manager.acquire(f"{CHAT}-new-sandbox", "owner", TEMPLATE)
    fresh = await manager.container_for(second.id)
    restored = await ProjectSync(store, manager, CHAT).restore_if_stale(second.id)
    assert restored is not None
    assert restored.number == identity.number
    assert await sandbox_files(fresh, project) == project
    assert (await read_workspace(fresh)).files == project
    built = await manager.run_command(second.id, ["npm", "run", "build"])
    assert built.ok, built.output
