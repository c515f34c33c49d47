"""Archives in and out of a real container: whole both ways, read in one thread, missing paths
said as not found."""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Iterator

import anyio
import docker
import pytest
from docker.models.containers import Container

from sandbox.containers.archives import read_archive, write_archive
from sandbox.errors import SandboxNotFound
from sandbox.images.templates import get_template

pytestmark = pytest.mark.docker
PAYLOAD = os.urandom(4 * 1024 * 1024)


@pytest.fixture(scope="module")
def container(docker_client: docker.DockerClient) -> Iterator[Container]:
    """A plain idle container of a sandbox image (no network, no kiln around it)."""
    made = docker_client.containers.run(
        get_template("vanilla").image,
        ["sleep", "600"],
        detach=True,
        network_mode="none",
        entrypoint=[],
        labels={"kiln.test": "archives"},
    )
    try:
        yield made
    finally:
        made.remove(force=True)


def _tar(name: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _member(archive: bytes) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        member = tar.next()
        assert member is not None
        extracted = tar.extractfile(member)
        assert extracted is not None
        return extracted.read()


@pytest.mark.anyio
async def test_an_archive_is_written_and_read_back_whole(container: Container) -> None:
    await write_archive(container, "/tmp", _tar("big.bin", PAYLOAD))
    assert _member(await read_archive(container, "/tmp/big.bin")) == PAYLOAD


@pytest.mark.anyio
async def test_reads_cancelled_midway_leave_nothing_open(container: Container) -> None:
    """The suite turns ResourceWarnings into failures: a response dropped unread would be one."""
    await write_archive(container, "/tmp", _tar("again.bin", PAYLOAD))
    for _ in range(5):
        with anyio.move_on_after(0.001):
            await read_archive(container, "/tmp/again.bin")
    assert _member(await read_archive(container, "/tmp/again.bin")) == PAYLOAD


@pytest.mark.anyio
async def test_a_missing_path_is_not_found_in_words(container: Container) -> None:
    with pytest.raises(SandboxNotFound, match="not found"):
        await read_archive(container, "/tmp/no-such-file")
