"""Admission by memory: what sandboxes really use, on the whole host.

A count of sandboxes says little about memory: an idle ``vanilla`` sandbox uses ~23 MiB, an idle
``vite-react`` one ~104 MiB and ~244 MiB while it installs and builds (its resident builder
warm), and other kiln instances on the same host use the same memory. So a new chat is admitted
only while the host's ``MemAvailable`` stays above a reserve (``KILN_HOST_MEMORY_RESERVE``,
10 % of its memory) once the chat's sandbox is busy: ``MemAvailable`` counts every instance's
sandboxes (and everything else on the host) as they really are, and each template's measured
busy size (:attr:`~sandbox.images.templates.Template.busy_mib`) is what the new one may add.
Chats admitted whose sandbox is not made yet have not shown up in ``MemAvailable``: admission
counts them at their busy size too (:mod:`app.runs.admission`). The warm pool grows only into
the same room (:meth:`~sandbox.lifecycle.manager.SandboxManager`'s free slots). On a swarm the
nodes hold the sandboxes: the room is each node's unreserved memory there
(:meth:`~sandbox.lifecycle.manager.SandboxManager.memory_room`), not this host's.

``KILN_MAX_SANDBOXES`` stays as an upper bound of the count (pids, addresses), per instance.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sandbox.images.templates import get_template
from sandbox.settings import host_memory_bytes

MIB = 2**20
MEMINFO = Path("/proc/meminfo")


@dataclass(frozen=True, slots=True)
class HostMemory:
    """The host's memory in bytes: all of it, and what ``MemAvailable`` says is available."""

    total: int
    available: int

    @classmethod
    def read(cls, meminfo: Path = MEMINFO) -> HostMemory:
        """The numbers of ``/proc/meminfo`` (a read of a kernel file: no I/O wait); where it is
        unreadable, the physical memory as both (no memory is then known to be in use)."""
        fields: dict[str, int] = {}
        try:
            for line in meminfo.read_text().splitlines():
                name, _, rest = line.partition(":")
                if name in ("MemTotal", "MemAvailable"):
                    fields[name] = int(rest.split()[0]) * 1024  # kB
        except (OSError, ValueError, IndexError):
            fields.clear()
        total = fields.get("MemTotal") or host_memory_bytes()
        return cls(total, fields.get("MemAvailable", total))

    def reserve(self, percent: float) -> int:
        """The bytes ``MemAvailable`` must keep: ``percent`` of the host's memory."""
        return int(self.total * percent / 100)

    def headroom(self, percent: float) -> int:
        """What sandboxes may still take before ``MemAvailable`` falls under the reserve."""
        return self.available - self.reserve(percent)


def busy_bytes(template: str) -> int:
    """What one sandbox of ``template`` uses at most in ordinary work (installing, building)."""
    return get_template(template).busy_mib * MIB


def room_for(headroom: int, template: str) -> int:
    """How many more sandboxes of ``template`` fit, each busy, in ``headroom`` bytes."""
    return max(0, headroom // busy_bytes(template))
