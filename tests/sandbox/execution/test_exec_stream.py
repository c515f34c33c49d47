"""Line assembly, the output cap and the timeout wrapper of ``docker exec`` (no Docker here).

Running real commands through ``exec_streaming`` is covered by ``test_commands``.
"""

from __future__ import annotations

import pytest

from sandbox.execution.exec_stream import (
    CappedOutput,
    ExecResult,
    LineAssembler,
    parse_oom_kills,
    timeout_argv,
)

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("chunks", "lines"),
    [
        pytest.param([b"one\ntwo\n"], ["one", "two"], id="whole-lines"),
        pytest.param([b"on", b"e\ntw", b"o"], ["one", "two"], id="split-lines"),
        pytest.param([b"crlf\r\n"], ["crlf"], id="crlf"),
        pytest.param(["é✓\n".encode()[:1], "é✓\n".encode()[1:]], ["é✓"], id="utf8-split"),
        pytest.param([b"bad \xff byte\n"], ["bad \ufffd byte"], id="invalid-utf8"),
        pytest.param([b"\n\n"], ["", ""], id="empty-lines"),
        pytest.param([b""], [], id="nothing"),
    ],
)
def test_line_assembler_joins_chunks_into_lines(chunks: list[bytes], lines: list[str]) -> None:
    assembler = LineAssembler()
    seen = [line for chunk in chunks for line in assembler.feed(chunk)]
    assert seen + assembler.close() == lines


async def test_capped_output_forwards_until_the_cap_then_one_marker() -> None:
    forwarded: list[str] = []

    async def sink(line: str) -> None:
        forwarded.append(line)

    output = CappedOutput(10, sink)
    for line in ("1234", "5678", "9abc", "never"):
        await output.add(line)
    assert forwarded == ["1234", "5678", "[kiln: output truncated after 10 bytes]"]
    assert output.lines == forwarded
    assert output.truncated


async def test_capped_output_without_a_sink_still_collects() -> None:
    output = CappedOutput(100, None)
    await output.add("line")
    assert (output.lines, output.truncated) == (["line"], False)


def test_timeout_argv_wraps_the_command_in_coreutils_timeout() -> None:
    assert timeout_argv(["npm", "test"], 90) == ["timeout", "--kill-after=5", "90", "npm", "test"]
    assert timeout_argv(["ls"], 0)[2] == "0.1"  # never "0", which would mean no timeout


@pytest.mark.parametrize(
    ("exit_code", "timed_out", "oom_killed", "ok"),
    [
        pytest.param(0, False, False, True, id="success"),
        pytest.param(1, False, False, False, id="failure"),
        pytest.param(0, True, False, False, id="timed-out"),
        pytest.param(137, False, True, False, id="out-of-memory"),
    ],
)
def test_exec_result_ok(exit_code: int, timed_out: bool, oom_killed: bool, ok: bool) -> None:
    result = ExecResult(
        ("ls",), exit_code, "", truncated=False, timed_out=timed_out, oom_killed=oom_killed
    )
    assert result.ok is ok


@pytest.mark.parametrize(
    ("output", "count"),
    [
        pytest.param(
            b"low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\noom_group_kill 0\n", 2, id="cgroup-v2"
        ),
        pytest.param(
            b"cat: /sys/fs/cgroup/memory.events: No such file or directory\n"
            b"oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
            1,
            id="cgroup-v1",
        ),
        pytest.param(b"cat: no such file\n", None, id="unknown"),
    ],
)
def test_parse_oom_kills(output: bytes, count: int | None) -> None:
    assert parse_oom_kills(output) == count


@pytest.mark.parametrize(
    ("exit_code", "output", "quota_used_up", "verdict"),
    [
        pytest.param(1, "Error: EDQUOT: disk quota exceeded", False, "quota", id="edquot"),
        pytest.param(1, "Error: Unknown system error -122, open", False, "quota", id="node-edquot"),
        pytest.param(1, "dd: writing 'big': Disk quota exceeded", False, "quota", id="strerror"),
        # Node says only "unknown error" for EDQUOT on a write: the quota itself tells.
        pytest.param(1, "UNKNOWN: unknown error, write", True, "quota", id="quota-used-up"),
        pytest.param(1, "npm ERR! code ENOSPC", False, "full", id="npm-enospc"),
        pytest.param(2, "cp: No space left on device", False, "full", id="strerror-space"),
        pytest.param(1, "ENOSPC, and the quota is used up", True, "quota", id="quota-first"),
        pytest.param(0, "warning: ENOSPC retried, done", True, "", id="succeeded-anyway"),
        pytest.param(1, "SyntaxError: Unexpected token", False, "", id="other-failure"),
        pytest.param(1, "ENOSPCX is no code", False, "", id="not-a-word"),
    ],
)
def test_a_failure_on_the_quota_or_a_full_disk_is_told_apart(
    exit_code: int, output: str, quota_used_up: bool, verdict: str
) -> None:
    result = ExecResult(
        ("node", "a.js"), exit_code, output, False, False, quota_used_up=quota_used_up
    )
    assert (result.over_quota, result.disk_full) == (verdict == "quota", verdict == "full")
