"""The disk quota on swarm nodes: the node kiln picks, the keeper, and on the session's real
nodes a sandbox that fills its disk stops at its quota there (the contract suite runs with the
quota too: tests/cluster/test_swarm_contract.py)."""

from __future__ import annotations

import re
import secrets
import subprocess
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path
from types import SimpleNamespace

import pytest

from sandbox.backends.contract import SandboxClaim, sandbox_template
from sandbox.backends.swarm import SwarmBackend
from sandbox.cluster.node_disk import (
    KEEPER_CAPABILITIES,
    NodeDisk,
    ensure_node_disk,
    keeper_name,
    keeper_run_kwargs,
    remove_node_disk_keeper,
)
from sandbox.containers.disk_quota import BOUND_FOLDERS, SUBVOLUME_INODE, SandboxDisk
from sandbox.containers.labels import volume_name
from sandbox.disk_mounts import DEFAULT_DISK_ROOT
from sandbox.errors import DiskFull, SandboxConfigError, SandboxUnavailable
from sandbox.images.builder import PROXY_IMAGE
from sandbox.images.templates import SANDBOX_UID, get_template
from tests.cluster.nodes import Cluster
from tests.cluster.test_swarm_contract import DISK_QUOTA, opened_swarm
from tests.sandbox.containers.test_disk_quota import BOUND, FILL, QUOTA, SLACK

CLUSTER_IMAGES = (get_template("vanilla").image, PROXY_IMAGE)
GIB = 2**30
needs_disk_root = pytest.mark.skipif(
    not DISK_QUOTA, reason="no btrfs disk root (scripts/setup.sh makes one)"
)


def test_the_keeper_has_no_network_and_only_the_capabilities_its_commands_need() -> None:
    kwargs = keeper_run_kwargs("inst", Path("/srv/disk"))
    assert kwargs["network_mode"] == "none"
    assert kwargs["cap_drop"] == ["ALL"]
    assert kwargs["cap_add"] == list(KEEPER_CAPABILITIES)
    assert kwargs["read_only"] is True
    assert kwargs["volumes"] == {"/srv/disk": {"bind": "/srv/disk", "mode": "rw"}}
    moved = keeper_run_kwargs("inst", Path("/srv/other"))["labels"]
    assert moved["kiln.disk.config"] != kwargs["labels"]["kiln.disk.config"]  # replaced on change


@pytest.fixture(scope="module")
async def quota_backend(swarm_nodes: Cluster) -> AsyncIterator[SwarmBackend]:
    """The swarm backend with a 300 MiB disk quota per sandbox on the nodes' btrfs root."""
    async with opened_swarm(swarm_nodes, "nodedisk", disk_quota="300m") as backend:
        yield backend


@pytest.mark.anyio
@pytest.mark.docker
@needs_disk_root
async def test_a_sandbox_that_fills_its_disk_stops_at_its_quota_on_its_node(
    quota_backend: SwarmBackend, swarm_nodes: Cluster
) -> None:
    """The workspace, home and both temporary folders share the one quota on the node; kiln
    reads it there; nothing else is writable; destroy removes the subvolume, and the instance's
    keepers and folder go with its shared parts."""
    backend, instance = quota_backend, quota_backend.settings.instance
    sandbox_id = f"nodedisk{secrets.token_hex(3)}"
    claim = SandboxClaim(
        sandbox_id,
        sandbox_template(backend.settings, "vanilla"),
        volume_name(sandbox_id),
        backend.settings.network,
        {},
    )
    assert claim.template.resources.disk == "300m"
    status = await backend.create(claim)
    assert backend.disk is not None
    folder = backend.disk.layout.folder(claim.volume)  # the nodes' folders are the host's here
    try:
        assert folder.stat().st_ino == SUBVOLUME_INODE
        assert (folder / "workspace" / "package.json").is_file()
        find = ["sh", "-c", "find / -xdev -writable 2>/dev/null"]
        writable = await backend.exec(status, find, timeout=60, output_cap=1 << 16)
        assert set(writable.output.split()) == {"/workspace", *BOUND}
        assert await backend.quota_used_up(claim) is False
        fill = ["node", "-e", FILL]
        result = await backend.exec(status, fill, timeout=120, output_cap=1 << 16)
        stopped = dict(line.split(" stopped", 1) for line in result.output.splitlines())
        assert set(stopped) == {"workspace", *(f"{where}/more.bin" for where in BOUND)}, stopped
        written = int(stopped["workspace"].split()[1].rstrip(":"))
        assert 100 * 2**20 < written <= QUOTA + SLACK
        # A keeper that no longer runs (its node's engine restarted without it) is made again.
        for each in swarm_nodes.nodes:
            with closing(each.client()) as engine:
                for keeper in engine.containers.list(filters={"name": keeper_name(instance)}):
                    keeper.stop(timeout=1)
        assert await backend.quota_used_up(claim) is True
    finally:
        await backend.destroy(claim)
    assert not folder.exists()
    await backend.release_shared()
    assert not backend.disk.layout.instance_folder.exists()


@pytest.mark.anyio
@pytest.mark.docker
async def test_a_disk_root_on_no_btrfs_is_refused_naming_the_node_and_the_root(
    swarm_nodes: Cluster, tmp_path: Path
) -> None:
    instance = f"test-nodedisk-{secrets.token_hex(3)}"
    layout = SandboxDisk(tmp_path, instance, QUOTA)  # the test's own folder: not btrfs
    node = swarm_nodes.nodes[1]
    with closing(node.client()) as engine:
        try:
            refused = re.escape(f"{str(tmp_path)!r} is not on a btrfs filesystem on node")
            with pytest.raises(SandboxConfigError, match=f"{refused} {node.name!r}"):
                await ensure_node_disk(engine, layout, node.name)
        finally:
            assert await remove_node_disk_keeper(engine, instance, None)


class HostKeeper:
    """A keeper whose ``exec_run`` runs the command on this host (the scripts, without a node)."""

    def exec_run(self, argv: list[str], user: str, demux: bool) -> SimpleNamespace:
        assert user == "0"
        assert demux
        done = subprocess.run(argv, capture_output=True, check=False)
        return SimpleNamespace(exit_code=done.returncode, output=(done.stdout, done.stderr))


@needs_disk_root
@pytest.mark.anyio
async def test_the_keepers_scripts_make_limit_clear_read_and_remove_a_subvolume() -> None:
    layout = SandboxDisk(DEFAULT_DISK_ROOT, f"test-nodedisk-{secrets.token_hex(3)}", QUOTA)
    disk = NodeDisk(layout, HostKeeper(), "host")
    volume = "kiln-ws-scripts"
    folder = layout.folder(volume)
    try:
        assert await disk.usage(volume) is None  # none yet
        assert await disk.create(volume) == folder / "workspace"
        assert await disk.create(volume) == folder / "workspace"  # again: a no-op
        assert folder.stat().st_ino == SUBVOLUME_INODE
        for name, _, mode in BOUND_FOLDERS:
            found = (folder / name).stat()
            assert (found.st_uid, found.st_mode & 0o7777) == (SANDBOX_UID, mode), name
        (folder / "tmp" / "left.txt").write_text("x" * 4096)
        (folder / "home" / "kept.txt").write_text("kept")
        await disk.clear_temporary(volume)
        assert not (folder / "tmp" / "left.txt").exists()
        assert (folder / "home" / "kept.txt").read_text() == "kept"
        used = await disk.usage(volume)
        assert used is not None
        assert used[1] == QUOTA
        assert not await disk.used_up(volume)
        assert await disk.remove(volume)
        assert not folder.exists()
        assert not await disk.remove(volume)
    finally:
        if folder.exists():
            subprocess.run(["btrfs", "subvolume", "delete", str(folder)], check=False)
        layout.instance_folder.rmdir()


class FailingKeeper:
    def __init__(self, code: int, err: bytes) -> None:
        self.code, self.err = code, err

    def exec_run(self, argv: list[str], user: str, demux: bool) -> SimpleNamespace:
        return SimpleNamespace(exit_code=self.code, output=(None, self.err))


@pytest.mark.parametrize(
    ("err", "error"),
    [
        pytest.param(b"ERROR: No space left on device", DiskFull, id="full"),
        pytest.param(b"ERROR: cannot access", SandboxUnavailable, id="other"),
    ],
)
@pytest.mark.anyio
async def test_a_failed_keeper_command_names_the_node_and_the_folder(
    err: bytes, error: type[Exception]
) -> None:
    disk = NodeDisk(SandboxDisk(Path("/srv/disk"), "inst", QUOTA), FailingKeeper(1, err), "n2")
    with pytest.raises(error, match=r"node 'n2': '/srv/disk/inst/vol': ERROR: ") as failed:
        await disk.remove("vol")
    assert err.decode() in str(failed.value)
