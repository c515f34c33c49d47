"""Tar archives in and out of a container, one copy for every backend.

docker-py's ``get_archive`` answers a generator over a streamed response: carried across an
``await`` and dropped unread (its caller cancelled), it leaves the response's connection to the
garbage collector. So an archive is read to its last byte in the one thread that asked for it,
and the caller gets bytes or nothing.
"""

from __future__ import annotations

from docker.models.containers import Container

from sandbox.docker_boundary import call


async def read_archive(container: Container, path: str) -> bytes:
    """``path`` of ``container`` as a tar (:class:`SandboxNotFound` when it does not exist)."""
    return await call(_read_whole, container, path)


async def write_archive(container: Container, path: str, archive: bytes) -> None:
    """Unpack ``archive`` at ``path`` in ``container``."""
    await call(container.put_archive, path, archive)


def _read_whole(container: Container, path: str) -> bytes:
    # Blocking, in a thread: the stream is read to its end (then its connection is released)
    # or closed, never handed across an await.
    chunks, _stat = container.get_archive(path)
    try:
        return b"".join(chunks)
    finally:
        chunks.close()
