"""Run one argv in a sandbox with ``docker exec``: streamed lines, a timeout and an output cap.

The argv goes to Docker as a list (no shell anywhere) and runs as the sandbox user in
``/workspace``, wrapped in coreutils ``timeout`` so the process group is killed inside the
container when the time is up; a host-side deadline a little later stops waiting even if the
engine never closes the stream. Output (stdout and stderr interleaved, as they arrive) is split
into lines and handed to an async sink; past ``output_cap`` bytes it is dropped and one marker
line says so. The exit code comes from ``exec_inspect``.

Exit 137 (SIGKILL) is ambiguous: ``timeout`` killing after its grace, or the kernel's OOM killer
at the container's memory limit. Docker does not say for an exec (``State.OOMKilled`` is about
the container's main process), so the container's memory cgroup is asked: its ``oom_kill``
counter (``memory.events`` on cgroup v2, ``memory.oom_control`` on v1) is read before the
command and, after a 137, again; a rise means the command was killed for memory
(``ExecResult.oom_killed``), which is never reported as a timeout.

No process started by a command outlives it: ``timeout`` kills the command's process group, but a
process that left the group (``setsid``, a double fork, a detached child), even with an empty
environment, would keep running with whatever the command could reach. Each command runs with a
mark of its own that its processes cannot scrub (:mod:`sandbox.execution.command_mark`); when
the command has ended, every process of the container carrying it (or a mark of no command still
running) is killed.
"""

from __future__ import annotations

import codecs
import functools
import re
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
import docker

from sandbox.docker_boundary import call, call_owned, run_wrapped
from sandbox.execution.app_env import Redaction, with_app_env
from sandbox.execution.command_mark import KILL_LEFTOVERS, marked_argv, new_mark
from sandbox.execution.host_cgroup import host_kill_leftovers, host_oom_kills, parse_oom_kills
from sandbox.images.templates import SANDBOX_UID, WORKSPACE

OutputSink = Callable[[str], Awaitable[None]]
TIMEOUT_EXIT_CODES = (124, 137)  # coreutils timeout: TERM sent (124), KILL after grace (137)
KILLED_EXIT_CODE = 137  # 128 + SIGKILL: timeout's KILL or the OOM killer
# The memory cgroup's OOM kill counter, cgroup v2 then v1 (cat prints whichever exists).
OOM_COUNTER_ARGV = (
    "cat",
    "/sys/fs/cgroup/memory.events",
    "/sys/fs/cgroup/memory/memory.oom_control",
)
KILL_GRACE_SECONDS = 5
HOST_GRACE_SECONDS = 15.0
NO_SECRETS = Redaction()


# How programs print the kernel's EDQUOT (a quota, here the sandbox's own: Node's libuv has no
# name for errno 122 and says "system error -122" or "unknown error") and ENOSPC (a full disk).
QUOTA_WORDS = re.compile(r"\bEDQUOT\b|Disk quota exceeded|system error -122")
NO_SPACE_WORDS = re.compile(r"\bENOSPC\b|No space left on device")


@dataclass(frozen=True, slots=True)
class ExecResult:
    """How a command ended and what it printed (up to the cap)."""

    argv: tuple[str, ...]
    exit_code: int
    output: str
    truncated: bool
    timed_out: bool
    oom_killed: bool = False  # killed by the kernel at the sandbox's memory limit
    quota_used_up: bool = False  # the sandbox's disk quota was (nearly) full when it ended

    @property
    def ok(self) -> bool:
        """Whether the command exited 0 in time."""
        return self.exit_code == 0 and not self.timed_out and not self.oom_killed

    @property
    def over_quota(self) -> bool:
        """Whether it failed on the sandbox's disk quota: used up when it ended, or the
        program printed the kernel's EDQUOT (the exit code cannot say)."""
        return not self.ok and (self.quota_used_up or bool(QUOTA_WORDS.search(self.output)))

    @property
    def disk_full(self) -> bool:
        """Whether it failed on a full disk (ENOSPC), not on its quota."""
        return not self.ok and not self.over_quota and bool(NO_SPACE_WORDS.search(self.output))


class LineAssembler:
    """Turns byte chunks into complete text lines, decoding UTF-8 across chunk borders."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""

    def feed(self, chunk: bytes) -> list[str]:
        """The lines completed by ``chunk`` (without their line ends)."""
        text = self._partial + self._decoder.decode(chunk)
        *lines, self._partial = text.split("\n")
        return [line.removesuffix("\r") for line in lines]

    def close(self) -> list[str]:
        """The last, unterminated line, if any."""
        rest = self._partial + self._decoder.decode(b"", final=True)
        self._partial = ""
        return [rest.removesuffix("\r")] if rest else []


class CappedOutput:
    """Collects lines up to a byte budget and forwards them to the sink, secrets redacted."""

    def __init__(
        self, cap: int, sink: OutputSink | None, redaction: Redaction = NO_SECRETS
    ) -> None:
        self._cap = cap
        self._sink = sink
        self._redaction = redaction
        self._used = 0
        self.lines: list[str] = []
        self.truncated = False

    async def add(self, line: str) -> None:
        """Keep and forward ``line`` unless the budget is spent."""
        if self.truncated:
            return
        line = self._redaction.text(line)
        size = len(line.encode()) + 1
        if self._used + size > self._cap:
            self.truncated = True
            line = f"[kiln: output truncated after {self._used} bytes]"
        else:
            self._used += size
        self.lines.append(line)
        if self._sink is not None:
            await self._sink(line)


def timeout_argv(argv: Sequence[str], seconds: float) -> list[str]:
    """``argv`` wrapped in coreutils ``timeout`` (TERM at ``seconds``, KILL a little later)."""
    return ["timeout", f"--kill-after={KILL_GRACE_SECONDS}", f"{max(seconds, 0.1):g}", *argv]


async def exec_streaming(
    client: docker.DockerClient,
    container_id: str,
    argv: Sequence[str],
    *,
    timeout: float,
    output_cap: int,
    on_output: OutputSink | None = None,
    redaction: Redaction = NO_SECRETS,
) -> ExecResult:
    """Run ``argv`` in the container as the sandbox user, with the app's environment
    (:mod:`sandbox.execution.app_env`); stream its output lines, ``redaction`` applied, to the
    sink."""
    oom_before = await oom_kills(client, container_id)
    mark = new_mark()
    exec_id = await create_exec(
        client, container_id, marked_argv(timeout_argv(with_app_env(argv), timeout), mark)
    )
    stream = await call_owned(
        close_stream, client.api.exec_start, exec_id, stream=True, demux=False
    )
    output = CappedOutput(output_cap, on_output, redaction)
    try:
        with anyio.move_on_after(timeout + KILL_GRACE_SECONDS + HOST_GRACE_SECONDS) as deadline:
            await _pump(stream, output)
    finally:
        with anyio.CancelScope(shield=True):  # a cancelled command must not leak its socket
            await call(close_stream, stream)
            await kill_leftovers(client, container_id, mark)
    info = await call(client.api.exec_inspect, exec_id)
    exit_code = info.get("ExitCode")
    oom_killed = (
        exit_code == KILLED_EXIT_CODE
        and oom_before is not None
        and ((await oom_kills(client, container_id) or 0) > oom_before)
    )
    timed_out = deadline.cancelled_caught or (exit_code in TIMEOUT_EXIT_CODES and not oom_killed)
    return ExecResult(
        argv=tuple(argv),
        exit_code=-1 if exit_code is None else int(exit_code),
        output="\n".join(output.lines),
        truncated=output.truncated,
        timed_out=timed_out,
        oom_killed=oom_killed,
    )


def close_stream(stream: Any) -> None:
    """Close an exec's output stream and its response (blocking).

    docker-py's CancellableStream.close() unblocks a read still running, but skips a response
    already read to the end, leaving its socket open (a ResourceWarning), so the response is
    closed too."""
    try:
        stream.close()
    finally:
        stream._response.close()


async def kill_leftovers(client: docker.DockerClient, container_id: str, mark: int) -> None:
    """Kill what the command marked ``mark`` left running in the container: from the host when
    it can (:mod:`sandbox.execution.host_cgroup`), else with an exec."""
    kill = functools.partial(host_kill_leftovers, container_id, mark)
    if await anyio.to_thread.run_sync(kill):
        return
    exec_id = await create_exec(client, container_id, ["sh", "-c", KILL_LEFTOVERS, "sh", str(mark)])
    await call(client.api.exec_start, exec_id)


async def oom_kills(client: docker.DockerClient, container_id: str) -> int | None:
    """How many processes the container's memory cgroup has OOM-killed; None if unknown. Read
    on the host when it can, else with an exec."""
    counted = host_oom_kills(container_id)
    if counted is not None:
        return counted
    exec_id = await create_exec(client, container_id, list(OOM_COUNTER_ARGV))
    output = await call(client.api.exec_start, exec_id)
    return parse_oom_kills(output)


async def create_exec(client: docker.DockerClient, container_id: str, argv: list[str]) -> str:
    """An exec of ``argv`` as the sandbox user in the workspace; its id."""
    response = await call(
        client.api.exec_create,
        container_id,
        argv,
        stdout=True,
        stderr=True,
        user=f"{SANDBOX_UID}:{SANDBOX_UID}",
        workdir=WORKSPACE,
    )
    return str(response["Id"])


async def _pump(stream: Iterator[bytes], output: CappedOutput) -> None:
    assembler = LineAssembler()
    while True:
        # Abandonable: the host-side deadline must not wait for a thread stuck in a read.
        chunk = await anyio.to_thread.run_sync(
            functools.partial(run_wrapped, next, stream, None), abandon_on_cancel=True
        )
        if chunk is None:
            break
        for line in assembler.feed(chunk):
            await output.add(line)
    for line in assembler.close():
        await output.add(line)
