"""A failed result marked when the sandbox's quota is used up."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.containers.disk_quota import SandboxDisk
from sandbox.errors import SandboxError, SandboxUnavailable
from sandbox.execution.exec_stream import ExecResult
from sandbox.execution.quota_verdict import with_quota_verdict


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("exit_code", "answer", "marked"),
    [
        pytest.param(1, True, True, id="failed-on-a-full-quota"),
        pytest.param(1, False, False, id="failed-for-another-reason"),
        pytest.param(0, True, False, id="succeeded-never-asked"),
        pytest.param(1, SandboxUnavailable("btrfs away"), False, id="unknown-keeps-the-result"),
    ],
)
async def test_a_failed_result_is_marked_when_the_quota_is_used_up(
    exit_code: int, answer: bool | SandboxError, marked: bool
) -> None:
    result = ExecResult(("node", "a.js"), exit_code, "", False, False)
    verdict = await with_quota_verdict(_answering(answer), "kiln-ws-a", result)
    assert verdict.quota_used_up is marked
    assert await with_quota_verdict(None, "kiln-ws-a", result) is result


def _answering(answer: bool | SandboxError) -> SandboxDisk:
    """A disk whose quota gives ``answer`` (or fails with it)."""

    class Answering(SandboxDisk):
        async def used_up(self, volume: str) -> bool:
            if isinstance(answer, SandboxError):
                raise answer
            return answer

    return Answering(Path("/q"), "i", 2**30)
