"""A ``docker exec``'s binary output, read frame by frame: linear, bounded and cancellable.

docker-py reads an exec's multiplexed stream (8-byte frame headers: stream id, size) from the raw
socket under the HTTP response. Bytes the response's buffered reader took in along with the
headers (the exec's first output, when the engine sends it before kiln's thread reads the
headers: a loaded host) are skipped, the next "header" is payload, and the read fails ("108 is not
a valid stream") or, worse, goes on misaligned. With ``demux=True`` and no streaming it also
joins each frame onto what it read so far (``out += frame``): quadratic in the output's size.

:class:`ExecFrames` reads the same stream through the buffered reader, so nothing is skipped,
checks every header (a stream id other than stdout/stderr is :class:`ExecStreamBroken`, in
words), and hands out stdout in batches (:meth:`ExecFrames.read_batch`) from threads that a
cancel abandons: :meth:`ExecFrames.close` shuts the socket, which ends a read still blocked in it.
The process in the container is the caller's to stop (``exec_stream.kill_leftovers``).
"""

from __future__ import annotations

import contextlib
import socket
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import anyio
import docker

from sandbox.docker_boundary import call, call_owned
from sandbox.errors import SandboxError
from sandbox.execution.command_mark import marked_argv, new_mark
from sandbox.execution.exec_stream import (
    HOST_GRACE_SECONDS,
    KILL_GRACE_SECONDS,
    TIMEOUT_EXIT_CODES,
    create_exec,
    kill_leftovers,
    timeout_argv,
)

STDOUT, STDERR = 1, 2
HEADER = struct.Struct(">BxxxL")
BATCH_BYTES = 1 << 20  # stdout handed out per thread hop (fewer hops, bounded memory)
STDERR_KEPT = 4096  # the first bytes of stderr, for the words of a failure


class ExecStreamBroken(SandboxError):
    """The exec's output stream from Docker is not what its protocol says (or was cut)."""

    code = "exec_stream_broken"


class ExecReadTimeout(SandboxError):
    """The exec's output did not end within its deadline (the process was killed)."""

    code = "exec_read_timeout"


@dataclass(frozen=True, slots=True)
class BoundedOutput:
    """What a command printed on stdout, up to a cap, and how it ended."""

    stdout: bytes
    stderr: str  # its first bytes, for the words of a failure
    exit_code: int | None  # None: stopped at the cap (the process was killed)

    @property
    def over_cap(self) -> bool:
        """Whether stdout passed the cap (then ``stdout`` is cut and the process killed)."""
        return self.exit_code is None


@dataclass
class ExecFrames:
    """One started exec's output (``exec_start(socket=True)``), read through the response's
    buffered reader (see the module docstring)."""

    response: Any  # the ``requests`` response docker-py hangs on the socket as ``_response``
    stderr: bytearray = field(default_factory=bytearray)
    ended: bool = False

    @classmethod
    def from_socket(cls, raw_socket: Any) -> ExecFrames:
        """The frames of ``client.api.exec_start(exec_id, socket=True)``'s answer."""
        response = getattr(raw_socket, "_response", None)
        if response is None:
            raise ExecStreamBroken("docker: the exec's socket carries no response to read from")
        return cls(response)

    @property
    def _reader(self) -> BinaryIO:
        reader: BinaryIO = self.response.raw._fp.fp
        return reader

    def read_batch(self, limit: int = BATCH_BYTES) -> list[bytes]:
        """The next stdout chunks, about ``limit`` bytes or up to the end (``[]``: ended).
        Blocks; stderr is kept (its first :data:`STDERR_KEPT` bytes) for the failure's words."""
        chunks: list[bytes] = []
        got = 0
        while got < limit and not self.ended:
            frame = self._frame()
            if frame is None:
                self.ended = True
            elif frame[0] == STDOUT:
                chunks.append(frame[1])
                got += len(frame[1])
            elif len(self.stderr) < STDERR_KEPT:
                self.stderr += frame[1][: STDERR_KEPT - len(self.stderr)]
        return chunks

    def _frame(self) -> tuple[int, bytes] | None:
        try:
            header = self._reader.read(HEADER.size)
            if not header:
                return None
            if len(header) < HEADER.size:
                raise ExecStreamBroken(
                    f"docker: the exec's output was cut in a header ({header!r})"
                )
            stream, size = HEADER.unpack(header)
            if stream not in (STDOUT, STDERR):
                raise ExecStreamBroken(
                    f"docker: the exec's output is malformed: stream {stream!r} in {header!r}"
                )
            data = self._reader.read(size)
        except (OSError, ValueError) as exc:  # a closed socket or reader: the read was stopped
            raise ExecStreamBroken(f"docker: the exec's output could not be read: {exc!s}") from exc
        if len(data) < size:
            raise ExecStreamBroken(
                f"docker: the exec's output was cut ({len(data)} of {size} bytes)"
            )
        return stream, data

    def close(self) -> None:
        """Shut the connection (a read blocked in it ends) and release the response."""
        sock = getattr(getattr(self._reader, "raw", None), "_sock", None)
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):  # already shut by the engine
                sock.shutdown(socket.SHUT_RDWR)
        self.response.close()


def release_exec_socket(raw_socket: Any) -> None:
    """Close a started exec's socket that nobody will read (its caller left)."""
    try:
        ExecFrames.from_socket(raw_socket).close()
    finally:
        raw_socket.close()


async def read_stdout(
    client: docker.DockerClient,
    container_id: str,
    argv: Sequence[str],
    *,
    max_bytes: int,
    timeout: float,
) -> BoundedOutput:
    """Run ``argv`` in the container as the sandbox user and collect its stdout, stopping (and
    killing it, with every process it started) past ``max_bytes``, at ``timeout`` seconds
    (:class:`ExecReadTimeout`) or when the caller is cancelled."""
    mark = new_mark()
    argv_marked = marked_argv(timeout_argv(argv, timeout), mark)
    exec_id = await create_exec(client, container_id, argv_marked)
    raw_socket = await call_owned(release_exec_socket, client.api.exec_start, exec_id, socket=True)
    frames = ExecFrames.from_socket(raw_socket)
    chunks: list[bytes] = []
    got, finished = 0, False
    try:
        with anyio.move_on_after(timeout + KILL_GRACE_SECONDS + HOST_GRACE_SECONDS) as deadline:
            while not frames.ended and got <= max_bytes:
                batch = await call(frames.read_batch)
                chunks.extend(batch)
                got += sum(len(chunk) for chunk in batch)
            # Only here: closing the socket ends a read still blocked in it as if at the end.
            finished = frames.ended
    finally:
        with anyio.CancelScope(shield=True):  # a stopped read must not leave its process behind
            await call(frames.close)
            if not finished:
                await kill_leftovers(client, container_id, mark)
    stderr = frames.stderr.decode("utf-8", "replace").strip()
    if deadline.cancelled_caught:
        raise ExecReadTimeout(f"docker: {argv[0]!r} printed no end within {timeout:g} s")
    if not finished:
        return BoundedOutput(b"".join(chunks)[: max_bytes + 1], stderr, None)
    info = await call(client.api.exec_inspect, exec_id)
    code = info.get("ExitCode")
    if code in TIMEOUT_EXIT_CODES:  # coreutils timeout stopped it in the container
        raise ExecReadTimeout(f"docker: {argv[0]!r} ran out of its {timeout:g} s")
    return BoundedOutput(b"".join(chunks), stderr, -1 if code is None else int(code))
