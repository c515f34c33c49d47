"""Which idle sandboxes a new one replaces: a pure function of the records (the manager acts).

Two rules, applied when a chat needs a new sandbox (:meth:`SandboxManager.acquire`):

- **per user**: a user holds at most ``max_sandboxes_per_user`` sandboxes (warm ones are
  nobody's): past it their least recently used idle ones go; when none of theirs is idle (all
  are in use by runs) the new one is refused (``SandboxCapacity``, in words);
- **full host**: when the host is full (the count of ``KILN_MAX_SANDBOXES`` or the memory
  reserve, :mod:`sandbox.backends.host_memory`) and the first rule freed nothing, the sandbox
  idle longest goes once it has been unused for ``idle_ttl_full_seconds`` (the reaper waits the
  full ``idle_ttl_seconds`` on a host with room).

Idle means released by its run (``state == "idle"``) and not held by this process. A sandbox
given up loses nothing of its project: every turn's files are in the chat's versions, and the
next run in that chat restores them into a new sandbox.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sandbox.errors import SandboxCapacity
from sandbox.lifecycle.registry import SandboxRecord


@dataclass(frozen=True, slots=True)
class RoomFacts:
    """What deciding which sandboxes to give up looks at."""

    owner: str
    per_user: int  # max_sandboxes_per_user
    host_full: bool
    idle_before: float  # on a full host, idle sandboxes last used before this may go
    held: frozenset[str] = frozenset()  # ids this process holds (never given up)


def sandboxes_to_give_up(records: Iterable[SandboxRecord], facts: RoomFacts) -> list[SandboxRecord]:
    """The sandboxes to remove before ``facts.owner`` gets a new one (module docstring);
    ``SandboxCapacity`` when the owner's own sandboxes are all in use at their limit."""
    records = list(records)

    def idle(record: SandboxRecord) -> bool:
        return record.state == "idle" and record.id not in facts.held

    mine = [r for r in records if r.owner == facts.owner and r.state != "warm"]
    mine_idle = sorted((r for r in mine if idle(r)), key=lambda r: r.last_used)
    excess = len(mine) + 1 - facts.per_user
    if excess > len(mine_idle):
        raise SandboxCapacity(
            f"user {facts.owner!r} has {len(mine) - len(mine_idle)} sandboxes in use, the most "
            f"one user may have is {facts.per_user} (KILN_MAX_SANDBOXES_PER_USER)"
        )
    if excess > 0:
        return mine_idle[:excess]
    if not facts.host_full:
        return []
    spare = [r for r in records if idle(r) and r.last_used < facts.idle_before]
    return [min(spare, key=lambda r: r.last_used)] if spare else []
