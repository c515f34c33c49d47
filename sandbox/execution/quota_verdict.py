"""A failed command's result marked when its sandbox's disk quota was used up: the words a user
meets then say "the disk is full", not the command's own failure."""

from __future__ import annotations

import logging
from dataclasses import replace

from sandbox.containers.disk_quota import QuotaDisk
from sandbox.errors import SandboxError
from sandbox.execution.exec_stream import ExecResult

log = logging.getLogger(__name__)


async def with_quota_verdict(disk: QuotaDisk | None, volume: str, result: ExecResult) -> ExecResult:
    """A failed command's or install's result, marked when the sandbox's quota is used up."""
    if result.ok or disk is None:
        return result
    try:
        used_up = await disk.used_up(volume)
    except SandboxError as exc:  # the command's own result still counts
        log.warning("disk usage of %r unknown: %s", volume, exc)
        return result
    return replace(result, quota_used_up=True) if used_up else result
