"""The stall watch on installs: silence stops npm in words, heartbeats keep it going unseen."""

from __future__ import annotations

import anyio
import pytest

from sandbox.execution.exec_stream import ExecResult, OutputSink
from sandbox.execution.install_stall import run_watched

pytestmark = pytest.mark.anyio
ARGV = ("npm", "install")
OK = ExecResult(ARGV, 0, "added 1 package", truncated=False, timed_out=False)


class Sink:
    def __init__(self) -> None:
        self.lines: list[str] = []

    async def __call__(self, line: str) -> None:
        self.lines.append(line)


async def test_an_install_that_goes_silent_is_stopped_in_words() -> None:
    async def hangs(sink: OutputSink) -> ExecResult:
        await sink("npm warn something")
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    sink = Sink()
    result = await run_watched(
        hangs, ARGV, sink, registry="http://10.0.0.1:4873/", stall_seconds=0.2
    )
    assert (result.timed_out, result.ok) == (True, False)
    assert sink.lines[0] == "npm warn something"
    assert "no progress for 0.2 s" in sink.lines[1]
    assert "'http://10.0.0.1:4873/'" in sink.lines[1]
    assert result.output.splitlines() == sink.lines


async def test_failed_attempts_are_no_progress() -> None:
    async def retries(sink: OutputSink) -> ExecResult:
        while True:  # what npm prints every 30 s against a registry that never answers
            await sink("npm http fetch GET http://proxy/vite attempt 1 failed with FETCH_ERROR")
            await anyio.sleep(0.05)

    sink = Sink()
    result = await run_watched(retries, ARGV, sink, registry="R", stall_seconds=0.2)
    assert result.timed_out
    assert len(sink.lines) == 1  # only the words: npm http lines are never shown
    assert "no progress" in sink.lines[0]


async def test_heartbeats_keep_a_long_install_going_and_are_not_shown() -> None:
    async def busy(sink: OutputSink) -> ExecResult:
        for index in range(8):  # 8 x 0.05 s: longer than the stall time, never silent that long
            await sink(f"npm http fetch GET 200 http://proxy/pkg{index} 12ms (cache miss)")
            await anyio.sleep(0.05)
        await sink("added 1 package")
        return OK

    sink = Sink()
    assert await run_watched(busy, ARGV, sink, registry="R", stall_seconds=0.2) is OK
    assert sink.lines == ["added 1 package"]


async def test_a_failing_runner_fails_as_it_did() -> None:
    async def crashes(sink: OutputSink) -> ExecResult:
        raise RuntimeError("npm crashed")

    with pytest.raises(RuntimeError, match="npm crashed"):
        await run_watched(crashes, ARGV, None, registry="R", stall_seconds=0.2)
