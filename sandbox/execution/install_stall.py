"""Cutting off an npm install that makes no progress: a stall watch on its output.

npm's own limits do not bound a stalled install: with ``--fetch-timeout=30000 --fetch-retries=1``
a lock naming a registry address nobody answers on still ran 4 min 33 s (its requests queue
behind ``maxsockets``) and ended "Exit handler never called!"; with npm's defaults, 7 min 54 s.
So kiln runs npm with ``--loglevel=http`` (a line per request answered, or failed) and counts
an answered request, or any line of npm's usual output, as progress: an install without progress
for :data:`STALL_SECONDS` is stopped (the exec is cancelled, which kills its processes) and ends
timed out with words that say why. The ``npm http`` lines are never shown: the person sees npm's
usual output.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence

import anyio

from sandbox.execution.exec_stream import ExecResult, OutputSink

# Longer than one request may take (npm's fetch timeout is 30 s, Verdaccio's uplink's 60 s
# would surface as an error line before): silence this long means nothing moves.
STALL_SECONDS = 75.0
HTTP_PREFIX = "npm http "
# A request answered (any status) or served from npm's cache. Not "attempt 1 failed with
# FETCH_ERROR": a stalled registry makes npm print those every 30 s, and they are no progress.
ANSWERED = re.compile(r"npm http (fetch [A-Z]+ \d{3} |cache )")
Runner = Callable[[OutputSink], Awaitable[ExecResult]]


def stall_words(seconds: float, registry: str) -> str:
    """What the person reads when an install stalled."""
    return (
        f"npm made no progress for {seconds:g} s (no answer from the npm registry proxy "
        f"{registry!r}): the install was stopped"
    )


class StallWatch:
    """Forwards an install's output (without the heartbeat lines) and moves the install's
    deadline on with every line."""

    def __init__(self, on_output: OutputSink | None, seconds: float) -> None:
        self._on_output = on_output
        self._seconds = seconds
        self.scope = anyio.CancelScope(deadline=anyio.current_time() + seconds)
        self.lines: list[str] = []

    async def line(self, text: str) -> None:
        """One line of npm's output: progress unless it is an ``npm http`` line that says no
        answer came; shown unless it is an ``npm http`` line."""
        if not text.startswith(HTTP_PREFIX) or ANSWERED.match(text):
            self.scope.deadline = anyio.current_time() + self._seconds
        if text.startswith(HTTP_PREFIX):
            return
        self.lines.append(text)
        if self._on_output is not None:
            await self._on_output(text)


async def run_watched(
    run: Runner,
    argv: Sequence[str],
    on_output: OutputSink | None,
    *,
    registry: str,
    stall_seconds: float = STALL_SECONDS,
) -> ExecResult:
    """``run(sink)`` under a stall watch: its result, or a timed-out one in words."""
    watch = StallWatch(on_output, stall_seconds)
    with watch.scope:
        return await run(watch.line)
    words = stall_words(stall_seconds, registry)
    if on_output is not None:
        await on_output(words)
    output = "\n".join([*watch.lines, words])
    return ExecResult(tuple(argv), -1, output, truncated=False, timed_out=True)
