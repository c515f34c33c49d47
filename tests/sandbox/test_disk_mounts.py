"""The mount rule of sandboxes' disk root: which mount holds a path, and which folder is a
btrfs mount point."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.disk_mounts import mount_of, usable_root

MOUNTINFO = "\n".join(
    [
        "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw",
        "30 22 7:0 / /var/lib/kiln/sandbox-disk rw,relatime shared:9 - btrfs /dev/loop0 rw",
        "31 22 7:1 / /mnt/with\\040space rw - btrfs /dev/loop1 rw",
        "32 22 0:5 / /var/lib/kiln/sandbox-disk/inner rw - tmpfs tmpfs rw",
    ]
)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param(
            "/var/lib/kiln/sandbox-disk", ("/var/lib/kiln/sandbox-disk", "btrfs"), id="mount"
        ),
        pytest.param(
            "/var/lib/kiln/sandbox-disk/a/b", ("/var/lib/kiln/sandbox-disk", "btrfs"), id="below"
        ),
        pytest.param(
            "/var/lib/kiln/sandbox-disk/inner/x",
            ("/var/lib/kiln/sandbox-disk/inner", "tmpfs"),
            id="nested",
        ),
        pytest.param("/var/lib/kiln/sandbox-diskette", ("/", "ext4"), id="prefix-is-not-a-parent"),
        pytest.param("/mnt/with space/x", ("/mnt/with space", "btrfs"), id="escaped-space"),
    ],
)
def test_the_mount_holding_a_path_is_the_longest_parent(
    path: str, expected: tuple[str, str]
) -> None:
    assert mount_of(Path(path), MOUNTINFO) == (Path(expected[0]), expected[1])


@pytest.mark.parametrize(
    ("path", "usable"),
    [
        pytest.param("/var/lib/kiln/sandbox-disk", True, id="btrfs-mount-point"),
        pytest.param("/var/lib/kiln/sandbox-disk/a", False, id="inside-but-not-the-mount"),
        pytest.param("/var/lib/kiln/sandbox-disk/inner", False, id="not-btrfs"),
        pytest.param("/srv", False, id="plain-folder"),
    ],
)
def test_only_a_btrfs_mount_point_is_a_disk_root(path: str, usable: bool) -> None:
    assert usable_root(Path(path), MOUNTINFO) is usable
