"""Parking: what a stopping ``kiln serve`` does to its instance's sandboxes.

A stopped service must leave no container or network of its own running (Ctrl+C in a
terminal, SIGTERM from a supervisor), yet a chat's sandbox is a cache worth keeping: its
workspace volume holds the project's files *and* its installed ``node_modules``, so the next
start revives a container on it (``SandboxManager.container_for``) instead of restoring the
project and installing everything again. Parking therefore

- removes the container of every sandbox nobody else holds: idle ones, and those this process
  held (its runs were stopped; the next worker resumes them on the same volume);
- keeps each such sandbox's volume and registry record (with no container id), so the next
  start knows the volume: it is no orphan, and the idle TTL reaps it as before;
- removes the instance's shared sandbox network once no container uses it (Docker refuses while
  one does: a sandbox another process of the instance still runs), and only if it carries this
  instance's label; with it goes the instance's npm proxy, which listens on that network's
  gateway (its cache volume stays for the next start).

A sandbox another process holds ``in_use`` is left alone: that process may be mid-command.

A host of a multi-host deployment (``shared``: hosts on one database share the instance) parks
only the sandboxes it holds itself: an idle sandbox is still another host's preview, and one
host's restart must not take every host's previews down with it (the idle TTL reaps them).

Both removals go through the backend (:meth:`~sandbox.backends.contract.SandboxBackend.park`,
:meth:`~sandbox.backends.contract.SandboxBackend.park_shared`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Set
from dataclasses import dataclass, field

import anyio

from sandbox.backends.contract import SandboxBackend, SandboxClaim
from sandbox.errors import SandboxError
from sandbox.lifecycle.registry import SandboxRecord, SandboxRegistry
from sandbox.settings import SandboxSettings

log = logging.getLogger(__name__)
PARALLEL_REMOVALS = 8  # Docker serialises much of it; a few at once hide the round trips


@dataclass
class ParkReport:
    """What one parking removed (containers by sandbox id, networks by name) and kept."""

    parked: list[str] = field(default_factory=list)
    kept_in_use: list[str] = field(default_factory=list)
    networks_removed: list[str] = field(default_factory=list)
    proxy_removed: bool = False


def to_park(
    records: list[SandboxRecord], held_here: Set[str], *, shared: bool = False
) -> list[SandboxRecord]:
    """The records whose container goes: not in use, or in use by this very process; only the
    latter when other hosts of the instance serve the rest (``shared``)."""
    return [r for r in records if r.id in held_here or (not shared and r.state != "in_use")]


async def park(
    backend: SandboxBackend,
    registry: SandboxRegistry,
    settings: SandboxSettings,
    held_here: Set[str],
    claim_of: Callable[[SandboxRecord], SandboxClaim],
    *,
    shared: bool = False,
) -> ParkReport:
    """Park the instance's sandboxes (see the module docstring); the report."""
    records = await registry.all()
    chosen = to_park(records, held_here, shared=shared)
    report = ParkReport(kept_in_use=sorted({r.id for r in records} - {r.id for r in chosen}))
    limit = anyio.Semaphore(PARALLEL_REMOVALS)

    async def park_one(record: SandboxRecord) -> None:
        async with limit:
            await _park_one(backend, registry, claim_of(record))
        report.parked.append(record.id)

    async with anyio.create_task_group() as tasks:
        for record in chosen:
            tasks.start_soon(park_one, record)
    network_removed, report.proxy_removed = await backend.park_shared()
    if network_removed:
        report.networks_removed.append(settings.network)
    return report


async def _park_one(
    backend: SandboxBackend, registry: SandboxRegistry, claim: SandboxClaim
) -> None:
    """Remove one sandbox's workload; its record stays, without a container to point at."""
    try:
        await backend.park(claim)
        await registry.update(claim.sandbox_id, container_id="", ip="", preview="", state="idle")
    except SandboxError as exc:
        # One sandbox Docker would not let go of must not keep the others running.
        log.warning("sandbox %r could not be parked: %s", claim.sandbox_id, exc)
