"""The words and codes of a failed install or command."""

from __future__ import annotations

import pytest

from sandbox.execution.exec_stream import ExecResult
from sandbox.session_log import failure_code, failure_text


def _result(
    exit_code: int, output: str, *, oom: bool = False, timed_out: bool = False
) -> ExecResult:
    return ExecResult(("node", "fill.js"), exit_code, output, False, timed_out, oom_killed=oom)


@pytest.mark.parametrize(
    ("result", "code", "words"),
    [
        pytest.param(_result(1, "boom"), "command_failed", "exited with 1", id="failed"),
        pytest.param(_result(137, "", oom=True), "out_of_memory", "ran out of memory", id="memory"),
        pytest.param(
            _result(1, "Error: EDQUOT: disk quota exceeded, write"),
            "disk_quota_exceeded",
            "the sandbox's disk quota is used up",
            id="disk-quota",
        ),
        pytest.param(
            _result(1, "npm ERR! code ENOSPC"),
            "disk_full",
            "the server's disk is full",
            id="disk-full",
        ),
        pytest.param(_result(124, "", timed_out=True), "command_failed", "timed out", id="timeout"),
    ],
)
def test_a_failed_command_gets_a_code_and_words(result: ExecResult, code: str, words: str) -> None:
    assert failure_code(result, "command_failed") == code
    text = failure_text(result)
    assert text.startswith("'node fill.js' ")
    assert words in text
