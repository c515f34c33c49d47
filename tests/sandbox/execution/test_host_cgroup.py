"""A container's cgroup read from the host: the layouts, the OOM counter, killing marked processes
(real processes, a cgroup folder of the test's own)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.execution.host_cgroup import cgroup_folders, host_kill_marked, host_oom_kills

ID = "a" * 64


def test_each_known_layout_is_tried_for_a_full_container_id() -> None:
    assert cgroup_folders(ID, "memory", Path("/cg")) == [
        Path(f"/cg/memory/docker/{ID}"),
        Path(f"/cg/docker/{ID}"),
        Path(f"/cg/system.slice/docker-{ID}.scope"),
    ]
    assert cgroup_folders("kiln-sb-abc", "memory", Path("/cg")) == []  # a name: Docker's to say


@pytest.mark.parametrize(
    ("relative", "name", "text", "count"),
    [
        pytest.param(
            f"memory/docker/{ID}", "memory.oom_control", "under_oom 0\noom_kill 2\n", 2, id="v1"
        ),
        pytest.param(
            f"system.slice/docker-{ID}.scope", "memory.events", "oom 1\noom_kill 1\n", 1, id="v2"
        ),
    ],
)
def test_the_oom_counter_is_read_where_the_layout_has_it(
    tmp_path: Path, relative: str, name: str, text: str, count: int
) -> None:
    (tmp_path / relative).mkdir(parents=True)
    (tmp_path / relative / name).write_text(text)
    assert host_oom_kills(ID, tmp_path) == count


def test_without_a_readable_cgroup_the_host_cannot_tell(tmp_path: Path) -> None:
    assert host_oom_kills(ID, tmp_path) is None
    assert host_kill_marked(ID, "KILN_COMMAND", "m1", tmp_path) is False


@pytest.fixture
def two_sleepers() -> Iterator[tuple[subprocess.Popen[bytes], subprocess.Popen[bytes]]]:
    """One process carrying the command's mark and one that does not, both running: a process
    still inside its exec has no environment to read yet (CI's 16th run met that window)."""
    argv = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"]
    started = [
        subprocess.Popen(argv, env={**os.environ, "KILN_COMMAND": mark}, stdout=subprocess.PIPE)
        for mark in ("m1", "m2")
    ]
    for process in started:
        assert process.stdout is not None
        assert process.stdout.readline() == b"up\n"
    marked, other = started
    yield marked, other
    for process in started:
        process.kill()
        process.wait()
        assert process.stdout is not None
        process.stdout.close()


def test_only_the_processes_carrying_the_mark_are_killed(
    tmp_path: Path, two_sleepers: tuple[subprocess.Popen[bytes], subprocess.Popen[bytes]]
) -> None:
    marked, other = two_sleepers
    folder = tmp_path / "pids" / "docker" / ID
    folder.mkdir(parents=True)
    (folder / "cgroup.procs").write_text(f"{marked.pid}\n{other.pid}\n999999999\n")
    assert host_kill_marked(ID, "KILN_COMMAND", "m1", tmp_path) is True
    assert marked.wait(timeout=10) == -9
    assert other.poll() is None
