"""Reading a ``docker exec``'s output frame by frame: every byte, in words when the stream is
broken, stopped at a cap, a deadline or a cancel with its process killed.

The real-engine tests run in a bare container of the smallest sandbox image."""

from __future__ import annotations

import http.client
import io
import struct
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from sandbox.execution.exec_frames import (
    STDERR_KEPT,
    ExecFrames,
    ExecReadTimeout,
    ExecStreamBroken,
    read_stdout,
)
from tests.sandbox.docker_support import bare_sandbox_container, wait_until_gone

pytestmark = pytest.mark.anyio


def frame(stream: int, data: bytes) -> bytes:
    return struct.pack(">BxxxL", stream, len(data)) + data


def frames_of(raw: bytes) -> ExecFrames:
    """An :class:`ExecFrames` on ``raw`` as the response's buffered reader would give it."""
    response = SimpleNamespace(
        raw=SimpleNamespace(_fp=SimpleNamespace(fp=io.BytesIO(raw))), close=lambda: None
    )
    return ExecFrames.from_socket(SimpleNamespace(_response=response))


def test_stdout_comes_whole_and_stderr_is_kept_apart() -> None:
    raw = frame(1, b"abc") + frame(2, b"warning\n") + frame(1, b"def") + frame(2, b"x" * 9000)
    frames = frames_of(raw)
    got = [chunk for batch in iter(frames.read_batch, []) for chunk in batch]
    assert b"".join(got) == b"abcdef"
    assert frames.ended
    assert frames.stderr == (b"warning\n" + b"x" * 9000)[:STDERR_KEPT]


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        # What docker-py met when it read past bytes buffered with the headers: payload as a header.
        pytest.param(b"lorem ipsum dolor", "malformed: stream 108", id="payload-as-header"),
        pytest.param(frame(1, b"abc")[:5], "cut in a header", id="cut-header"),
        pytest.param(frame(1, b"abcdef")[:10], r"cut \(2 of 6 bytes\)", id="cut-frame"),
    ],
)
def test_a_broken_stream_is_told_in_words(raw: bytes, words: str) -> None:
    with pytest.raises(ExecStreamBroken, match=words) as caught:
        frames_of(raw).read_batch()
    assert caught.value.code == "exec_stream_broken"


@pytest.fixture(scope="module")
def container() -> Iterator[Any]:
    with bare_sandbox_container() as created:
        yield created


async def test_bytes_buffered_with_the_headers_are_not_lost(
    container: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loaded host: the exec's first output arrives before kiln's thread reads the response's
    headers, so the buffered reader takes it in with them (docker-py then skipped it and read
    payload as frame headers: "108 is not a valid stream", or nothing)."""
    begin = http.client.HTTPResponse.begin

    def late_begin(self: http.client.HTTPResponse) -> None:
        time.sleep(0.3)
        begin(self)

    monkeypatch.setattr(http.client.HTTPResponse, "begin", late_begin)
    argv = ["sh", "-c", "printf 'lorem ipsum\\n%.0s' $(seq 3000); head -c 200000 /dev/zero"]
    out = await read_stdout(container.client, container.id, argv, max_bytes=2**20, timeout=30)
    assert out.exit_code == 0
    assert out.stdout == b"lorem ipsum\n" * 3000 + bytes(200000)


async def test_past_the_cap_the_read_stops_and_the_process_is_killed(container: Any) -> None:
    argv = ["sh", "-c", "exec cat /dev/zero # cap"]
    out = await read_stdout(container.client, container.id, argv, max_bytes=3 * 2**20, timeout=60)
    assert out.over_cap
    assert 3 * 2**20 < len(out.stdout) <= 3 * 2**20 + 1
    await wait_until_gone(container, "# cap")


async def test_a_cancelled_read_kills_its_process(container: Any) -> None:
    argv = ["sh", "-c", "sleep 300 # cancelled"]
    with anyio.move_on_after(1.0):
        await read_stdout(container.client, container.id, argv, max_bytes=100, timeout=600)
    await wait_until_gone(container, "# cancelled")


async def test_a_read_past_its_deadline_is_told_in_words(container: Any) -> None:
    with pytest.raises(ExecReadTimeout, match="ran out of its 1 s"):
        await read_stdout(container.client, container.id, ["sleep", "30"], max_bytes=100, timeout=1)
