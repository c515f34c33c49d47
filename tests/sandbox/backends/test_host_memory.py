"""The host's memory as admission reads it, and the room it leaves."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.backends.host_memory import MIB, HostMemory, busy_bytes, room_for
from sandbox.settings import host_memory_bytes

MEMINFO = "MemTotal:       24683700 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\n"


def test_meminfo_gives_total_and_available(tmp_path: Path) -> None:
    (tmp_path / "meminfo").write_text(MEMINFO)
    memory = HostMemory.read(tmp_path / "meminfo")
    assert memory == HostMemory(24683700 * 1024, 20000000 * 1024)
    assert memory.reserve(10) == 24683700 * 1024 // 10
    assert memory.headroom(10) == 20000000 * 1024 - 24683700 * 1024 // 10


@pytest.mark.parametrize(
    "text",
    [pytest.param(None, id="missing"), pytest.param("MemTotal: lots\n", id="garbled")],
)
def test_an_unreadable_meminfo_counts_the_physical_memory_as_available(
    tmp_path: Path, text: str | None
) -> None:
    if text is not None:
        (tmp_path / "meminfo").write_text(text)
    memory = HostMemory.read(tmp_path / "meminfo")
    assert memory == HostMemory(host_memory_bytes(), host_memory_bytes())


def test_the_real_host_is_read() -> None:
    memory = HostMemory.read()
    assert 0 < memory.available <= memory.total


@pytest.mark.parametrize(
    ("headroom_mib", "room"),
    [
        pytest.param(-5, 0, id="under-the-reserve"),
        pytest.param(243, 0, id="short-of-one"),
        pytest.param(244 * 3 + 10, 3, id="three"),
    ],
)
def test_room_counts_whole_busy_sandboxes(headroom_mib: int, room: int) -> None:
    assert busy_bytes("vite-react") == 244 * MIB
    assert room_for(headroom_mib * MIB, "vite-react") == room
