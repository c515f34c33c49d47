"""Which processes of a sandbox a command left behind: a mark its processes cannot scrub.

No process started by a command may outlive it. Its process group is not enough (``setsid``, a
double fork or a detached child leave it), nor is its environment (a child started with an
empty one, ``env -i``, carries nothing: kiln issue 29). Each command instead runs under
``prlimit`` with a hard ``RLIMIT_RTTIME`` of a value of its own (:func:`marked_argv`): set before
the command's first instruction, inherited by everything it starts whatever that does to its
environment, session or parent, and harmless (it limits only real-time scheduling, which a
sandbox cannot get). A process without ``CAP_SYS_RESOURCE`` (every sandbox drops all
capabilities) can lower a hard limit but never raise it, so it cannot go back to "unlimited",
which every process kiln did not start as a command keeps (the container's main process and
its children, kiln's own probes).

When a command has ended, :func:`leftover_pids` picks the processes to kill: every one with a
finite limit that belongs to no command still running. A running command is told by its root,
the process ``docker exec`` started (its parent is outside the container); so a process that
lowered its limit to some other value is killed too, unless it guessed the value of a command
still running, and then with that one. Another command's processes are left alone.

Why not a cgroup per command: kiln would need write access to the container's cgroup on the
Docker host (not with a remote engine, nor without root), and moving the exec's first process
into it races with that process's first forks. The limit is read from ``/proc/<pid>/limits``,
which anyone may read, so the same rule runs from the host (:mod:`sandbox.execution.host_cgroup`)
and, where the host cannot look, inside the container (:data:`KILL_LEFTOVERS`).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

LIMIT_LINE = "Max realtime timeout"
MARK_BASE = 10**12  # µs: marks are 11.6 to 23 days, far from anything a program would set


@dataclass(frozen=True, slots=True)
class MarkedProcess:
    """What the rule needs of one process: its parent and its hard real-time limit."""

    parent: int
    mark: int | None  # ``None``: unlimited, not a command's


def new_mark() -> int:
    """A command's own mark."""
    return MARK_BASE + secrets.randbelow(MARK_BASE)


def marked_argv(argv: Sequence[str], mark: int) -> list[str]:
    """``argv`` run under ``prlimit`` with the command's mark as its hard real-time limit."""
    return ["prlimit", f"--rttime={mark}:{mark}", "--", *argv]


def parse_limit(limits: str) -> int | None:
    """The hard ``RLIMIT_RTTIME`` in ``/proc/<pid>/limits`` text (``None``: unlimited)."""
    for line in limits.splitlines():
        if line.startswith(LIMIT_LINE):
            hard = line[len(LIMIT_LINE) :].split()[1]
            return None if hard == "unlimited" else int(hard)
    raise ValueError(f"no {LIMIT_LINE!r} line in {limits!r}")


def parse_parent(stat: str) -> int:
    """The parent pid in ``/proc/<pid>/stat`` text (after the command name, which may hold
    spaces and parentheses)."""
    return int(stat.rsplit(")", 1)[1].split()[1])


def read_marked_process(folder: Path) -> MarkedProcess:
    """The process whose ``/proc`` folder is ``folder``."""
    stat = (folder / "stat").read_text()
    return MarkedProcess(parse_parent(stat), parse_limit((folder / "limits").read_text()))


def leftover_pids(processes: Mapping[int, MarkedProcess], mark: int) -> list[int]:
    """The pids to kill once the command marked ``mark`` ended, among ``processes`` (all of
    the container's): see the module docstring."""
    running = {
        p.mark
        for p in processes.values()
        if p.mark is not None and p.mark != mark and p.parent not in processes
    }
    return sorted(
        pid for pid, p in processes.items() if p.mark is not None and p.mark not in running
    )


# The same rule in POSIX sh, for an exec as the sandbox user (who owns every command's
# process); $1 is the mark. Builtins only in the loops: a fork per process would cost ~1 ms each.
KILL_LEFTOVERS = """
own=$1
for round in 1 2 3; do
  table=""
  for d in /proc/[0-9]*; do
    hard=""
    while read -r a b c soft h rest; do
      if [ "$a $b $c" = "Max realtime timeout" ]; then hard=$h; break; fi
    done 2>/dev/null < "$d/limits"
    case "$hard" in ""|unlimited) continue;; esac
    read -r stat 2>/dev/null < "$d/stat" || continue
    set -- ${stat##*) }
    table="$table${d#/proc/} $2 $hard
"
  done
  running=" "
  while read -r pid parent hard; do
    [ -n "$pid" ] && [ "$hard" != "$own" ] && [ ! -d "/proc/$parent" ] && running="$running$hard "
  done <<EOT
$table
EOT
  killed=0
  while read -r pid parent hard; do
    [ -n "$pid" ] || continue
    case "$running" in *" $hard "*) continue;; esac
    kill -9 "$pid" 2>/dev/null && killed=1
  done <<EOT
$table
EOT
  [ "$killed" = 0 ] && break
done
exit 0
"""
