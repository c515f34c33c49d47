"""Disk quotas per sandbox: the mount rule, the folders, and on the real engine (where setup
made the btrfs root) generated code that writes until its quota stops it."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import docker
import pytest

from sandbox.containers.disk_quota import (
    SandboxDisk,
    parse_qgroup_usage,
    sandbox_disk,
)
from sandbox.docker_boundary import call
from sandbox.errors import SandboxConfigError, SandboxUnavailable
from sandbox.images.templates import SANDBOX_UID
from sandbox.lifecycle.manager import SandboxManager
from sandbox.session_log import failure_code, failure_text
from sandbox.settings import SandboxSettings
from sandbox.writes.flush import ArchiveTarget, Flusher
from sandbox.writes.write_buffer import WriteBuffer
from tests.sandbox.docker_support import DISK_ROOT, TestInstances, manager_on, settings_for


def test_each_sandbox_has_its_folder_under_its_instance() -> None:
    disk = SandboxDisk(Path("/q"), "inst-1", 2**30)
    assert disk.folder("kiln-ws-ab12") == Path("/q/inst-1/kiln-ws-ab12")
    assert disk.workspace("kiln-ws-ab12") == Path("/q/inst-1/kiln-ws-ab12/workspace")
    assert disk.binds("kiln-ws-ab12") == {
        "/q/inst-1/kiln-ws-ab12/home": "/home/node",
        "/q/inst-1/kiln-ws-ab12/tmp": "/tmp",
        "/q/inst-1/kiln-ws-ab12/var-tmp": "/var/tmp",
    }


@pytest.mark.parametrize("name", ["../escape", "a/b", "", ".hidden", "x" * 300])
def test_a_volume_name_that_is_no_folder_name_is_refused_in_words(name: str) -> None:
    with pytest.raises(SandboxConfigError, match="not a safe folder name"):
        SandboxDisk(Path("/q"), "inst", 2**30).folder(name)


def test_settings_give_a_disk_only_with_a_root() -> None:
    assert sandbox_disk(SandboxSettings()) is None
    disk = sandbox_disk(SandboxSettings(disk_root=Path("/q"), instance="i", disk_quota="512m"))
    assert disk == SandboxDisk(Path("/q"), "i", 512 * 2**20)


# -- on the real engine ------------------------------------------------------------------

BOUND = ("/home/node", "/tmp", "/var/tmp")
QUOTA = 300 * 2**20
SLACK = 64 * 2**20  # btrfs accounts writes at its commits, so a quota may overshoot a little
# Generated code that writes until it fails: the workspace, then home and /tmp (one quota).
FILL = """
const fs = require('fs');
const chunk = Buffer.alloc(1 << 20, 1);
let written = 0;
try {
  const fd = fs.openSync('fill.bin', 'w');
  for (let i = 0; i < 4096; i++) { fs.writeSync(fd, chunk); written += chunk.length; }
} catch (error) { console.log('workspace stopped after ' + written + ': ' + error.message); }
for (const where of ['/home/node/more.bin', '/tmp/more.bin', '/var/tmp/more.bin']) {
  try { fs.writeFileSync(where, chunk); console.log(where + ' written'); }
  catch (error) { console.log(where + ' stopped: ' + error.message); }
}
process.exit(1);
"""

# CI runs setup, which makes the root: there a missing one fails these tests instead.
needs_disk_root = pytest.mark.skipif(
    DISK_ROOT is None and not os.environ.get("CI"),
    reason="no btrfs disk root (scripts/setup.sh makes one)",
)
on_engine = pytest.mark.docker


@pytest.fixture
async def small_disk(instances: TestInstances, redis_url: str) -> AsyncIterator[SandboxManager]:
    """A manager on an instance of its own whose sandboxes have 300 MiB of disk each."""
    settings = settings_for(instances.new("quota"), redis_url, disk_quota="300m")
    async with manager_on(settings) as opened:
        yield opened


async def _target(container: ArchiveTarget) -> ArchiveTarget:
    return container


async def _as_sandbox_user(client: docker.DockerClient, container_id: str, *argv: str) -> str:
    """The test's own probe, as the sandbox user (not the command policy)."""
    container = await call(client.containers.get, container_id)
    result = await call(container.exec_run, list(argv), user="1000:1000")
    return str(result.output.decode())


@pytest.mark.anyio
@on_engine
@needs_disk_root
async def test_code_that_fills_its_disk_stops_at_the_quota_in_words_and_the_host_keeps_its_space(
    small_disk: SandboxManager, docker_client: docker.DockerClient, buffer: WriteBuffer
) -> None:
    sandbox = await small_disk.provision("vanilla")
    neighbour = await small_disk.provision("vanilla")
    script = f"require('fs').writeFileSync('fill.js', {FILL!r})"
    await _as_sandbox_user(docker_client, sandbox.container_id, "node", "-e", script)
    free_before = shutil.disk_usage(DISK_ROOT.parent).free  # the host's disk, under the loop file
    result = await small_disk.run_command(sandbox.id, ["node", "fill.js"])
    host_used = free_before - shutil.disk_usage(DISK_ROOT.parent).free
    stopped = dict(line.split(" stopped", 1) for line in result.output.splitlines())
    # The workspace first, then home and both temporary folders: one quota for all it writes.
    assert set(stopped) == {"workspace", *(f"{where}/more.bin" for where in BOUND)}, stopped
    # Node has no name for EDQUOT ("UNKNOWN: unknown error, write"): kiln asks the quota.
    assert result.quota_used_up
    written = int(stopped["workspace"].split()[1].rstrip(":"))
    assert 100 * 2**20 < written <= QUOTA + SLACK  # btrfs counts a little late
    assert host_used < QUOTA + SLACK  # the host lost at most the quota
    assert failure_code(result, "command_failed") == "disk_quota_exceeded"
    assert "disk quota is used up" in failure_text(result)
    # kiln's own write of the model's next file is refused with the quota's code and words.
    await buffer.start_file("src/more.js")
    await buffer.append("src/more.js", "x" * 300_000)
    container = await small_disk.container_for(sandbox.id)
    report = await Flusher(buffer, lambda _: _target(container)).flush()
    assert [(f.path, f.code) for f in report.failed] == [("src/more.js", "disk_quota_exceeded")]
    # The full sandbox's neighbour writes as before.
    wrote = await _as_sandbox_user(
        docker_client, neighbour.container_id, "node", "-e", FILL.replace("4096", "20")
    )
    assert "workspace stopped" not in wrote
    assert "/tmp/more.bin written" in wrote


@pytest.mark.anyio
@on_engine
@needs_disk_root
async def test_nothing_outside_the_quota_is_writable_and_destroy_removes_the_subvolume(
    small_disk: SandboxManager, docker_client: docker.DockerClient
) -> None:
    sandbox = await small_disk.provision("vanilla")
    # A read-only root: nothing on it is writable, only the mount points of the quota's folders.
    find = "find / -xdev -writable 2>/dev/null"
    writable = await _as_sandbox_user(docker_client, sandbox.container_id, "sh", "-c", find)
    assert set(writable.split()) == {"/workspace", "/home/node", "/tmp", "/var/tmp"}
    folder = small_disk.disk.folder(sandbox.volume) if small_disk.disk else None
    assert folder is not None
    assert (folder / "workspace" / "package.json").is_file()
    await small_disk.destroy(sandbox.id)
    assert not folder.exists()


@pytest.mark.anyio
@on_engine
@needs_disk_root
async def test_the_reaper_removes_a_subvolume_whose_sandbox_is_gone(
    small_disk: SandboxManager,
) -> None:
    disk = small_disk.disk
    assert disk is not None
    await disk.create("kiln-ws-crashed1")  # a crash between removing the volume and this
    report = await small_disk.reap()
    assert report.orphan_disks == ["kiln-ws-crashed1"]
    assert "kiln-ws-crashed1" not in disk.volumes()


@pytest.mark.parametrize(
    ("shown", "usage"),
    [
        pytest.param(
            "Qgroupid Referenced Exclusive Max referenced Path\n"
            "-------- ---------- --------- -------------- ----\n"
            "0/402     104873984 104873984      314572800 kiln-ws-ab\n",
            (104873984, 314572800),
            id="limited",
        ),
        pytest.param("0/402 16384 16384 none kiln-ws-ab\n", (16384, 0), id="no-limit"),
    ],
)
def test_the_quota_usage_is_read_from_btrfs_output(shown: str, usage: tuple[int, int]) -> None:
    assert parse_qgroup_usage(shown) == usage


def test_unexpected_btrfs_output_is_refused_in_words() -> None:
    with pytest.raises(SandboxUnavailable, match="unexpected btrfs qgroup output: 'ERROR'"):
        parse_qgroup_usage("ERROR")


@pytest.mark.anyio
@needs_disk_root
async def test_two_callers_making_one_sandboxs_subvolume_at_once_both_get_it() -> None:
    assert DISK_ROOT is not None
    disk = SandboxDisk(DISK_ROOT, f"race-{os.getpid()}", QUOTA)
    try:
        async with anyio.create_task_group() as group:
            for _ in range(2):
                group.start_soon(disk.create, "kiln-ws-race")
        assert disk.volumes() == ["kiln-ws-race"]
        assert (disk.workspace("kiln-ws-race")).is_dir()
    finally:
        await disk.remove_all()
    assert not disk.instance_folder.exists()


@pytest.mark.anyio
@on_engine
@needs_disk_root
async def test_a_workspace_whose_volume_was_removed_by_hand_starts_over_from_the_template(
    small_disk: SandboxManager, docker_client: docker.DockerClient
) -> None:
    sandbox = await small_disk.provision("vanilla")
    await _as_sandbox_user(docker_client, sandbox.container_id, "touch", "/workspace/stale.txt")
    docker_client.containers.get(sandbox.container_id).remove(force=True)
    docker_client.volumes.get(sandbox.volume).remove(force=True)  # its subvolume stays behind
    revived = await small_disk.container_for(sandbox.id)
    listing = await _as_sandbox_user(docker_client, revived.id, "ls", "/workspace")
    assert "package.json" in listing.split()
    assert "stale.txt" not in listing.split()


@pytest.mark.anyio
@needs_disk_root
async def test_temporary_folders_start_empty_for_each_new_container_and_home_is_kept(
    tmp_path: Path,
) -> None:
    """What the app's code left in /tmp (a folder where kiln's socket was, a link out of the
    sandbox, a folder it cannot read) is gone for the next container; npm's cache in home stays."""
    assert DISK_ROOT is not None
    disk = SandboxDisk(DISK_ROOT, f"clear-{os.getpid()}", QUOTA)
    outside = tmp_path / "host-file"
    outside.write_text("the host's")
    try:
        folder = (await disk.create("kiln-ws-clear")).parent
        (folder / "tmp" / "kiln-build.sock" / "inside").mkdir(parents=True)
        (folder / "tmp" / "link-out").symlink_to(outside)
        (folder / "var-tmp" / "locked").mkdir(mode=0)
        (folder / "home" / ".npm").mkdir()
        await disk.clear_temporary("kiln-ws-clear")
        for name in ("tmp", "var-tmp"):
            assert list((folder / name).iterdir()) == []
            assert (folder / name).stat().st_mode & 0o7777 == 0o1777
            assert (folder / name).stat().st_uid == SANDBOX_UID
        assert (folder / "home" / ".npm").is_dir()
        assert outside.read_text() == "the host's"
    finally:
        await disk.remove_all()
