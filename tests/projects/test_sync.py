"""A chat's project and its sandbox in step, on real git and a stand-in container (the real
sandbox is in ``test_restore_end_to_end``): what is recorded, when a sandbox is restored, what
the user is told."""

from __future__ import annotations

import io
import json
import struct
import tarfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from app.projects.git_store import GitProjectStore
from app.projects.installed_match import INSTALLED_RECORD
from app.projects.rules import is_source
from app.projects.store import VersionInfo
from app.projects.sync import ProjectSync
from app.projects.workspace_io import ARCHIVE_SCRIPT, LISTING_SCRIPT, MARKER
from sandbox import SandboxUnavailable

pytestmark = pytest.mark.anyio

TEMPLATE = {"package.json": b'{"dependencies": {"react": "^18"}}\n', "src/main.jsx": b"main\n"}
PROJECT = {
    "package.json": b'{"dependencies": {"react": "^18", "zustand": "^4"}}\n',
    "src/main.jsx": b"main\n",
    "src/App.jsx": b"app\n",
}


def framed(stdout: bytes) -> bytes:
    """``stdout`` as Docker's multiplexed exec stream (frames of up to 32 KiB)."""
    step = 32768
    chunks = [stdout[i : i + step] for i in range(0, len(stdout), step)]
    return b"".join(struct.pack(">BxxxL", 1, len(chunk)) + chunk for chunk in chunks)


class FakeApi:
    """The exec calls of Docker's low-level API, answering the workspace's listing and
    archive from a :class:`FakeContainer`."""

    def __init__(self, container: FakeContainer) -> None:
        self.container = container
        self.scripts: dict[str, str] = {}

    def exec_create(self, container_id: str, argv: list[str], **options: Any) -> dict[str, str]:
        exec_id = f"exec{len(self.scripts)}"
        reads_record = argv[-1] == f"/workspace/{INSTALLED_RECORD}"
        self.scripts[exec_id] = INSTALLED_RECORD if reads_record else argv[argv.index("-c") + 1]
        return {"Id": exec_id}

    def exec_start(self, exec_id: str, socket: bool = False) -> Any:
        script = self.scripts[exec_id]
        assert script in (LISTING_SCRIPT, ARCHIVE_SCRIPT, INSTALLED_RECORD), script
        if script == INSTALLED_RECORD:
            stdout = self.container.files.get(INSTALLED_RECORD, b"")
        else:
            stdout = self.container.listing() if script == LISTING_SCRIPT else self.container.tar()
        response = SimpleNamespace(
            raw=SimpleNamespace(_fp=SimpleNamespace(fp=io.BytesIO(framed(stdout)))),
            close=lambda: None,
        )
        return SimpleNamespace(_response=response)

    def exec_inspect(self, exec_id: str) -> dict[str, int]:
        missing = self.scripts[exec_id] == INSTALLED_RECORD and not self.container.installed()
        return {"ExitCode": 1 if missing else 0}


class FakeContainer:
    """A workspace in memory that answers the listing, ``tar``, ``rm`` and ``put_archive`` like
    a sandbox."""

    name = id = "fake"

    def __init__(self, files: dict[str, bytes], links: dict[str, str] | None = None) -> None:
        self.files = dict(files)
        self.files["node_modules/react/index.js"] = b"react"  # never part of a project
        self.links = links or {}  # symbolic links: path -> target
        self.client = SimpleNamespace(api=FakeApi(self))

    def exec_run(self, argv: list[str], user: str = "") -> Any:
        assert argv[0] == "rm", argv
        for path in argv[3:]:
            self.files.pop(path.removeprefix("/workspace/"), None)
        return 0, b""

    def listing(self) -> bytes:
        marker = self.files.get(MARKER, b"")
        sources = [(p, len(c)) for p, c in self.files.items() if is_source(p)]
        sources += [(p, len(target)) for p, target in self.links.items()]
        return (
            marker
            + b"\0"
            + b"".join(f"{n} {p}".encode("utf-8", "surrogateescape") + b"\0" for p, n in sources)
        )

    def tar(self) -> bytes:
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w") as tar:
            for path, content in self.files.items():
                if is_source(path):
                    info = tarfile.TarInfo(f"./{path}")
                    info.size = len(content)
                    tar.addfile(info, io.BytesIO(content))
            for path, target in self.links.items():
                info = tarfile.TarInfo(f"./{path}")
                info.type, info.linkname = tarfile.SYMTYPE, target
                tar.addfile(info)
        return out.getvalue()

    def put_archive(self, path: str, data: bytes) -> bool:
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in tar:
                extracted = tar.extractfile(member) if member.isfile() else None
                if extracted is not None:
                    self.files[member.name] = extracted.read()
        return True

    def project(self) -> dict[str, bytes]:
        return {
            p: c for p, c in self.files.items() if not p.startswith(("node_modules/", ".kiln/"))
        }

    def installed(self) -> bool:
        return INSTALLED_RECORD in self.files

    def marker(self) -> str:
        return self.files[MARKER].decode().strip()


class Containers:
    def __init__(self, container: FakeContainer | None) -> None:
        self.container = container

    async def container_for(self, sandbox_id: str) -> FakeContainer:
        if self.container is None:
            raise SandboxUnavailable(f"docker is away for {sandbox_id!r}")
        return self.container


class Records:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, kind: str, record: Any) -> None:
        self.seen.append((kind, dict(record)))

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.seen]


class Installs:
    def __init__(self) -> None:
        self.sandboxes: list[str] = []

    async def __call__(self, sandbox_id: str, on_record: Any) -> bool:
        self.sandboxes.append(sandbox_id)
        return True


@pytest.fixture
def projects(tmp_path: Path) -> GitProjectStore:
    return GitProjectStore(tmp_path / "projects")


def sync_on(
    projects: GitProjectStore, container: FakeContainer | None, **options: Any
) -> ProjectSync:
    return ProjectSync(projects, Containers(container), "chat1", **options)


async def test_a_turn_is_recorded_once(projects: GitProjectStore) -> None:
    sync, records = sync_on(projects, FakeContainer(PROJECT), max_bytes=10_000), Records()
    first = await sync.record("s1", VersionInfo("run1", 1), records)
    assert first is not None
    assert projects.files("chat1", 1) == PROJECT
    assert await sync.record("s1", VersionInfo("run1", 2), records) is None
    assert records.kinds() == ["version", "version_unchanged"]  # the loop says "no changes"
    assert records.seen[0][1]["summary"] == "3 added, 0 changed, 0 removed"


async def test_files_no_version_can_keep_are_named_once_per_run(
    projects: GitProjectStore,
) -> None:
    not_utf8 = b"src/\xe9t\xe9.js".decode("utf-8", "surrogateescape")
    odd = {'src/say "hi"\\\t\n.js': b"odd\n", not_utf8: b"latin-1 name\n"}
    container = FakeContainer({**PROJECT, **odd}, links={"src/link.js": "App.jsx"})
    sync, records = sync_on(projects, container), Records()
    assert await sync.record("s1", VersionInfo("run1", 1), records) is not None
    assert projects.files("chat1", 1) == {**PROJECT, 'src/say "hi"\\\t\n.js': b"odd\n"}
    container.files["src/App.jsx"] = b"changed\n"
    assert await sync.record("s1", VersionInfo("run1", 2), records) is not None
    warnings = [record for kind, record in records.seen if kind == "warning"]
    assert len(warnings) == 1  # told at the first version, not again
    assert warnings[0]["code"] == "file_not_kept"
    assert warnings[0]["paths"] == ["src/\\xe9t\\xe9.js", "src/link.js"]  # JSON can carry it
    assert "'src/link.js' (it is a symbolic link)" in warnings[0]["message"]
    assert "'src/\\\\xe9t\\\\xe9.js' (its name is not UTF-8)" in warnings[0]["message"]
    json.dumps(warnings, ensure_ascii=False).encode()  # storable and sendable


async def test_a_recorded_sandbox_is_marked_with_its_version(projects: GitProjectStore) -> None:
    container = FakeContainer(PROJECT)
    version = await sync_on(projects, container).record("s1", VersionInfo("run1", 1))
    assert version is not None
    assert container.marker() == version.id
    assert projects.files("chat1", 1) == PROJECT  # the marker is no project file


async def test_a_project_over_the_cap_is_reported_not_recorded(projects: GitProjectStore) -> None:
    sync, records = sync_on(projects, FakeContainer(PROJECT), max_bytes=20), Records()
    assert await sync.record("s1", VersionInfo("run1", 1), records) is None
    assert projects.versions("chat1") == []
    ((kind, record),) = records.seen
    assert (kind, record["code"], record["severity"]) == (
        "error",
        "project_too_large",
        "recoverable",
    )
    assert "'package.json'" in record["message"]


async def test_a_new_sandbox_gets_the_latest_version_then_its_packages(
    projects: GitProjectStore,
) -> None:
    projects.commit("chat1", PROJECT, VersionInfo("run1", 1))
    fresh = FakeContainer({**TEMPLATE, "src/template-only.jsx": b"x"})
    installs, records = Installs(), Records()
    restored = await sync_on(projects, fresh, install=installs).restore_if_stale("s2", records)
    assert restored is not None
    assert restored.number == 1
    assert fresh.project() == PROJECT  # written byte for byte, the template's extra file gone
    assert installs.sandboxes == ["s2"]
    phases = [(record["phase"], record.get("installed")) for _, record in records.seen]
    assert phases == [("started", None), ("done", True)]


async def test_a_sandbox_with_the_latest_version_is_left_alone(projects: GitProjectStore) -> None:
    latest = projects.commit("chat1", PROJECT, VersionInfo("run1", 1))
    assert latest is not None
    installs, records = Installs(), Records()
    unmarked = FakeContainer(PROJECT)
    sync = sync_on(projects, unmarked, install=installs)
    assert await sync.restore_if_stale("s1", records) is None
    assert (installs.sandboxes, records.seen) == ([], [])
    assert unmarked.marker() == latest.id  # marked now: next time, no comparison


async def test_changes_that_could_not_be_recorded_are_kept(projects: GitProjectStore) -> None:
    latest = projects.commit("chat1", PROJECT, VersionInfo("run1", 1))
    assert latest is not None
    container = FakeContainer({**PROJECT, "big.bin": b"x" * 100})  # over the cap: not recorded
    container.files[MARKER] = f"{latest.id}\n".encode()
    assert await sync_on(projects, container).restore_if_stale("s1", Records()) is None
    assert container.files["big.bin"] == b"x" * 100


async def test_a_sandbox_behind_the_latest_version_is_restored(projects: GitProjectStore) -> None:
    first = projects.commit("chat1", TEMPLATE, VersionInfo("run1", 1))
    latest = projects.commit("chat1", PROJECT, VersionInfo(note="restored elsewhere"))
    assert first is not None
    assert latest is not None
    container = FakeContainer(TEMPLATE)
    container.files[MARKER] = f"{first.id}\n".encode()
    restored = await sync_on(projects, container).restore_if_stale("s1", Records())
    assert restored == latest
    assert container.project() == PROJECT
    assert container.marker() == latest.id


async def test_no_install_when_package_json_is_the_same(projects: GitProjectStore) -> None:
    projects.commit("chat1", {**TEMPLATE, "src/App.jsx": b"app\n"}, VersionInfo("run1", 1))
    installs, records = Installs(), Records()
    sync = sync_on(projects, FakeContainer(TEMPLATE), install=installs)
    assert await sync.restore_if_stale("s1", records) is not None
    assert installs.sandboxes == []
    assert records.seen[-1][1]["installed"] is None


LOCKED = {
    "packageJSON": {"dependencies": {"react": "^18"}},
    "lock": {
        "lockfileVersion": 3,
        "packages": {
            "": {"dependencies": {"react": "^18"}},
            "node_modules/react": {"version": "18.3.1", "integrity": "sha512-r"},
        },
    },
    "record": {"packages": {"node_modules/react": {"version": "18.3.1", "integrity": "sha512-r"}}},
}


@pytest.mark.parametrize(
    ("installed_react", "installs_expected"),
    [
        pytest.param("18.3.1", [], id="node_modules-holds-the-lock"),
        pytest.param("18.2.0", ["s1"], id="another-version-installed"),
    ],
)
async def test_no_install_when_node_modules_already_holds_what_the_lock_asks(
    projects: GitProjectStore, installed_react: str, installs_expected: list[str]
) -> None:
    renamed = {"name": "my-app", **LOCKED["packageJSON"]}  # not the template's package.json
    version = {
        "package.json": json.dumps(renamed).encode(),
        "package-lock.json": json.dumps(LOCKED["lock"]).encode(),
        "src/App.jsx": b"app\n",
    }
    projects.commit("chat1", version, VersionInfo("run1", 1))
    record = json.loads(json.dumps(LOCKED["record"]))
    record["packages"]["node_modules/react"]["version"] = installed_react
    container = FakeContainer({**TEMPLATE, INSTALLED_RECORD: json.dumps(record).encode()})
    installs, records = Installs(), Records()
    assert await sync_on(projects, container, install=installs).restore_if_stale("s1", records)
    assert installs.sandboxes == installs_expected
    assert records.seen[-1][1]["installed"] == (True if installs_expected else None)
    assert container.files["package.json"] == version["package.json"]


async def test_a_chat_without_a_project_restores_nothing(projects: GitProjectStore) -> None:
    records = Records()
    assert await sync_on(projects, None).restore_if_stale("s1", records) is None
    assert records.seen == []


async def test_a_failed_restore_is_reported_and_the_run_goes_on(projects: GitProjectStore) -> None:
    projects.commit("chat1", PROJECT, VersionInfo("run1", 1))
    records = Records()
    assert await sync_on(projects, None).restore_if_stale("s1", records) is None
    ((kind, record),) = records.seen
    assert (kind, record["code"]) == ("error", "sandbox_unavailable")
    assert "docker is away for 's1'" in record["message"]


async def test_restoring_a_version_writes_it_and_grows_history(projects: GitProjectStore) -> None:
    projects.commit("chat1", TEMPLATE, VersionInfo("run1", 1))
    projects.commit("chat1", PROJECT, VersionInfo("run1", 2))
    container = FakeContainer(PROJECT)
    source, version, installed = await sync_on(projects, container).restore("s1", 1)
    assert (source.number, version.number, version.info.note) == (1, 3, "restored version 1")
    assert installed is None  # no installer given
    assert container.project() == TEMPLATE
    assert projects.files("chat1", "latest") == TEMPLATE


async def test_restoring_without_a_sandbox_only_records(projects: GitProjectStore) -> None:
    projects.commit("chat1", TEMPLATE, VersionInfo("run1", 1))
    source, version, _ = await sync_on(projects, None).restore(None, "latest")
    assert (source.number, version.number) == (1, 2)


LOCK = '{"packages": {"node_modules/zustand": {"resolved": "%s/zustand/-/zustand-5.1.0.tgz"}}}\n'
PRIVATE_LOCK = (LOCK % "http://172.19.0.1:4873").encode()
PUBLIC_LOCK = (LOCK % "https://registry.npmjs.org").encode()


async def test_a_lock_with_kilns_address_is_recorded_with_the_public_one(
    projects: GitProjectStore,
) -> None:
    container = FakeContainer({**PROJECT, "package-lock.json": PRIVATE_LOCK})
    await sync_on(projects, container).record("s1", VersionInfo("run1", 1))
    assert projects.files("chat1", "latest")["package-lock.json"] == PUBLIC_LOCK


@pytest.mark.parametrize("how", [pytest.param("on-acquire", id="on-acquire"), "restore"])
async def test_an_old_version_with_kilns_address_is_restored_with_the_public_one(
    projects: GitProjectStore, how: str
) -> None:
    projects.commit("chat1", {**PROJECT, "package-lock.json": PRIVATE_LOCK}, VersionInfo("r", 1))
    container = FakeContainer(TEMPLATE)
    sync = sync_on(projects, container)
    if how == "restore":
        await sync.restore("s1", 1)
    else:
        await sync.restore_if_stale("s1")
    assert container.files["package-lock.json"] == PUBLIC_LOCK


async def in_step_sandbox(projects: GitProjectStore) -> tuple[ProjectSync, FakeContainer, str]:
    """A sandbox holding the latest version (marker and files), checked by a restore."""
    latest = projects.commit("chat1", PROJECT, VersionInfo("run1", 1))
    assert latest is not None
    container = FakeContainer(PROJECT)
    container.files[MARKER] = f"{latest.id}\n".encode()
    sync = sync_on(projects, container)
    assert await sync.restore_if_stale("s1", Records()) is None
    return sync, container, latest.id


async def test_a_turn_that_only_wrote_files_is_recorded_without_reading_the_workspace(
    projects: GitProjectStore,
) -> None:
    sync, container, _ = await in_step_sandbox(projects)
    assert sync.in_step_files("s1") == PROJECT  # the session starts from them (no exec)
    assert sync.in_step_files("s2") is None
    reads = len(container.client.api.scripts)  # the restore's listing
    container.files["src/App.jsx"] = b"edited\n"  # what the session wrote
    written = {"src/App.jsx": b"edited\n", "node_modules/x/index.js": b"never kept\n"}
    version = await sync.record("s1", VersionInfo("run2", 1), written=written)
    assert version is not None
    assert projects.files("chat1", 2) == {**PROJECT, "src/App.jsx": b"edited\n"}
    assert len(container.client.api.scripts) == reads  # no listing, no tar
    assert container.marker() == version.id
    container.files["src/new.jsx"] = b"new\n"  # the next turn builds on the version it recorded
    later = await sync.record("s1", VersionInfo("run2", 2), written={"src/new.jsx": b"new\n"})
    assert later is not None
    assert projects.files("chat1", 3) == container.project()
    assert len(container.client.api.scripts) == reads


@pytest.mark.parametrize(
    "change",
    [
        pytest.param("app_wrote", id="the-listing-disagrees-with-the-marker"),
        pytest.param("new_version", id="another-version-came-meanwhile"),
        pytest.param("over_cap", id="past-the-size-cap"),
    ],
)
async def test_known_files_give_way_to_a_read(projects: GitProjectStore, change: str) -> None:
    latest = projects.commit("chat1", PROJECT, VersionInfo("run1", 1))
    assert latest is not None
    container = FakeContainer(PROJECT)
    container.files[MARKER] = f"{latest.id}\n".encode()
    if change == "app_wrote":  # the app wrote a file of its own since the version
        container.files["data.json"] = b"[]\n"
    sync, records = sync_on(projects, container, max_bytes=200), Records()
    await sync.restore_if_stale("s1", Records())
    assert (sync.in_step_files("s1") is None) == (change == "app_wrote")
    if change == "new_version":  # a restore through the API, say
        projects.commit("chat1", {**PROJECT, "src/other.jsx": b"o\n"}, VersionInfo(note="x"))
    written = {"src/App.jsx": b"edited\n" * (40 if change == "over_cap" else 1)}
    container.files.update(written)
    reads = len(container.client.api.scripts)
    version = await sync.record("s1", VersionInfo("run2", 1), records, written=written)
    assert len(container.client.api.scripts) > reads  # read, not assumed
    if change == "over_cap":
        assert version is None
        assert records.seen[-1][1]["code"] == "project_too_large"
    else:
        assert version is not None
        assert projects.files("chat1", version.number) == container.project()
