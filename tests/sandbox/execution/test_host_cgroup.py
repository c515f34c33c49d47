"""A container's cgroup read from the host: the layouts, the OOM counter, killing a command's
leftovers by their mark (real processes, a cgroup folder of the test's own)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.execution.command_mark import marked_argv
from sandbox.execution.host_cgroup import cgroup_folders, host_kill_leftovers, host_oom_kills

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
    assert host_kill_leftovers(ID, OURS, tmp_path) is False


OURS, RUNNING, LOWERED = 10**12 + 1, 10**12 + 2, 5
SLEEP = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"]
# A command still running whose child lowered its own mark (it may: never raise it), so that it
# would no longer look like that command's: it is a leftover all the same.
LOWERING = (
    "import subprocess, sys, time;"
    f"child = subprocess.Popen(['prlimit', '--rttime={LOWERED}:{LOWERED}', '--', *{SLEEP!r}],"
    " stdout=sys.stdout); time.sleep(60)"
)


def started(argv: list[str], mark: int | None) -> subprocess.Popen[bytes]:
    """``argv`` under ``mark`` (as ``exec_streaming`` runs a command), once it printed."""
    wrapped = marked_argv(argv, mark) if mark is not None else argv
    process = subprocess.Popen(wrapped, stdout=subprocess.PIPE, env=dict(os.environ))
    assert process.stdout is not None
    assert process.stdout.readline() == b"up\n"
    return process


@pytest.fixture
def processes() -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    """Ours (its command ended), another command's (still running), a process no command
    started, and the running command's root whose child lowered its mark; all alive."""
    found = {
        "ours": started(SLEEP, OURS),
        "running": started(SLEEP, RUNNING),
        "unmarked": started(SLEEP, None),
        "lowering": started([sys.executable, "-c", LOWERING], RUNNING + 1),
    }
    yield found
    for process in found.values():
        process.kill()
        process.wait()
        assert process.stdout is not None
        process.stdout.close()


def test_the_commands_leftovers_are_killed_and_no_others(
    tmp_path: Path, processes: dict[str, subprocess.Popen[bytes]]
) -> None:
    root = processes["lowering"]
    lowered = next(
        int(pid) for pid in Path(f"/proc/{root.pid}/task/{root.pid}/children").read_text().split()
    )
    folder = tmp_path / "pids" / "docker" / ID
    folder.mkdir(parents=True)
    pids = [p.pid for p in processes.values()] + [lowered, 999999999]
    (folder / "cgroup.procs").write_text("".join(f"{pid}\n" for pid in pids))
    assert host_kill_leftovers(ID, OURS, tmp_path) is True
    assert processes["ours"].wait(timeout=10) == -9
    # SIGKILL lands when the kernel next runs the process: under load, not at once.
    assert gone_within(lowered, 10.0)
    assert [processes[name].poll() for name in ("running", "unmarked", "lowering")] == [None] * 3


def gone_within(pid: int, seconds: float) -> bool:
    """Whether ``pid`` dies within ``seconds`` (polled)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists() or gone(pid):
            return True
        time.sleep(0.01)  # polling under the deadline above
    return False


def gone(pid: int) -> bool:
    """Whether ``pid`` is dead (a zombie waiting for its parent counts)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")
