"""Flushing: the tar, the locked flush, replay into a new container, and the debounce scheduler.

Unit tests use a fake container (real Redis); the tests marked ``docker`` stream into a real one.
"""

from __future__ import annotations

import io
import itertools
import random
import string
import tarfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator

import anyio
import docker
import pytest
import redis.asyncio
from docker.models.containers import Container

from sandbox.docker_boundary import call, connect
from sandbox.errors import SandboxError, SandboxLost, SandboxUnavailable, WriteFailed
from sandbox.images.templates import WORKSPACE
from sandbox.settings import LABEL
from sandbox.writes.flush import (
    RETRY_FIRST_SECONDS,
    ArchiveTarget,
    FailedWrite,
    Flusher,
    FlushScheduler,
    build_workspace_tar,
)
from sandbox.writes.write_buffer import WriteBuffer
from tests.waiting import until

pytestmark = pytest.mark.anyio


class FakeContainer:
    """Records every archive it receives; can be told to fail or to be slow."""

    def __init__(self, name: str, delay: float = 0.0) -> None:
        self.id = name
        self.files: dict[str, bytes] = {}
        self.archives: list[dict[str, bytes]] = []
        self.failures_left = 0
        self.delay = delay
        self.active = 0
        self.max_active = 0
        self._guard = threading.Lock()

    def put_archive(self, path: str, data: bytes) -> bool:
        assert path == "/workspace"
        with self._guard:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            time.sleep(self.delay)  # runs in a worker thread, like the docker SDK call
            if self.failures_left:
                self.failures_left -= 1
                raise SandboxUnavailable(f"container {self.id!r} is gone")
            files = _regular_files(data)
            self.archives.append(files)
            self.files.update(files)
            return True
        finally:
            with self._guard:
                self.active -= 1


class FakeResolver:
    """Hands out ``current``; a test swaps it to simulate a replaced container."""

    def __init__(self, container: FakeContainer) -> None:
        self.current = container
        self.broken: Exception | None = None

    async def __call__(self, sandbox_id: str) -> ArchiveTarget:
        if self.broken is not None:
            raise self.broken
        return self.current


def _regular_files(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        out = {}
        for member in tar.getmembers():
            if member.isfile():
                extracted = tar.extractfile(member)
                assert extracted is not None
                out[member.name] = extracted.read()
        return out


async def _write(buffer: WriteBuffer, path: str, content: str) -> None:
    await buffer.start_file(path)
    await buffer.append(path, content)


def test_tar_holds_files_and_parent_folders_owned_by_the_sandbox_user() -> None:
    data = build_workspace_tar([("src/a/x.js", b"x"), ("src/a/y.js", b"yy"), ("r.md", b"")], 7.0)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = tar.getmembers()
        kinds = [(m.name, m.isdir(), oct(m.mode), m.uid, m.gid, m.size) for m in members]
        assert kinds == [
            ("src", True, "0o755", 1000, 1000, 0),
            ("src/a", True, "0o755", 1000, 1000, 0),
            ("src/a/x.js", False, "0o644", 1000, 1000, 1),
            ("src/a/y.js", False, "0o644", 1000, 1000, 2),
            ("r.md", False, "0o644", 1000, 1000, 0),
        ]
        assert {m.mtime for m in members} == {7}


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("/etc/passwd", id="absolute"),
        pytest.param("../x.js", id="parent"),
        pytest.param("a/../../x.js", id="inner-parent"),
        pytest.param("a//x.js", id="empty-segment"),
        pytest.param("./x.js", id="dot"),
        pytest.param("", id="empty"),
    ],
)
def test_tar_refuses_paths_outside_the_workspace(path: str) -> None:
    with pytest.raises(WriteFailed, match="outside the workspace"):
        build_workspace_tar([(path, b"x")])


async def test_a_flush_writes_every_dirty_file_in_one_archive(buffer: WriteBuffer) -> None:
    container = FakeContainer("c1")
    flusher = Flusher(buffer, FakeResolver(container))
    for index in range(3):
        await _write(buffer, f"src/f{index}.js", f"content {index}")
    report = await flusher.flush()
    assert report.paths == ("src/f0.js", "src/f1.js", "src/f2.js")
    assert len(container.archives) == 1
    assert container.files == {f"src/f{i}.js": f"content {i}".encode() for i in range(3)}
    assert (await flusher.flush()).paths == ()
    assert len(container.archives) == 1


async def test_a_new_container_receives_every_file_again(buffer: WriteBuffer) -> None:
    resolver = FakeResolver(FakeContainer("c1"))
    flusher = Flusher(buffer, resolver)
    await _write(buffer, "a.js", "a")
    await _write(buffer, "b.js", "b")
    await flusher.flush()
    resolver.current = FakeContainer("c2")
    await _write(buffer, "c.js", "c")
    report = await flusher.flush()
    assert report.replayed
    assert resolver.current.files == {"a.js": b"a", "b.js": b"b", "c.js": b"c"}


async def test_a_container_gone_mid_flush_is_resolved_again(buffer: WriteBuffer) -> None:
    dying, fresh = FakeContainer("dying"), FakeContainer("fresh")
    dying.failures_left = 1
    resolver = FakeResolver(dying)

    async def resolve(sandbox_id: str) -> ArchiveTarget:
        container = resolver.current
        resolver.current = fresh  # the next resolution provisions a replacement
        return container

    await _write(buffer, "a.js", "a")
    report = await Flusher(buffer, resolve).flush()
    assert (report.container_id, fresh.files) == ("fresh", {"a.js": b"a"})


async def test_a_second_failure_is_write_failed_and_keeps_the_files_dirty(
    buffer: WriteBuffer,
) -> None:
    container = FakeContainer("c1")
    container.failures_left = 2
    await _write(buffer, "a.js", "a")
    with pytest.raises(WriteFailed, match=buffer.sandbox_id) as caught:
        await Flusher(buffer, FakeResolver(container)).flush()
    assert isinstance(caught.value.__cause__, SandboxUnavailable)
    assert [f.path for f in await buffer.dirty_files()] == ["a.js"]


async def test_a_sandbox_lost_with_its_node_is_said_as_that_and_keeps_the_files_dirty(
    buffer: WriteBuffer,
) -> None:
    dying = FakeContainer("on-a-dead-node")
    dying.failures_left = 1
    resolver = FakeResolver(dying)

    async def resolve(sandbox_id: str) -> ArchiveTarget:
        if dying.failures_left == 0:  # resolved again: no node holds its workspace now
            raise SandboxLost(f"sandbox {sandbox_id!r}: no reachable swarm node holds it")
        return resolver.current

    await _write(buffer, "a.js", "a")
    with pytest.raises(SandboxLost, match="no reachable swarm node"):
        await Flusher(buffer, resolve).flush()
    assert [f.path for f in await buffer.dirty_files()] == ["a.js"]


async def test_racing_flushers_lose_nothing(buffer: WriteBuffer, redis_url: str) -> None:
    container = FakeContainer("c1", delay=0.005)
    other_client = redis.asyncio.Redis.from_url(redis_url)  # a second process, in effect
    other_buffer = WriteBuffer(other_client, buffer.sandbox_id, ttl_seconds=600)
    flushers = [Flusher(b, FakeResolver(container)) for b in (buffer, other_buffer)]
    expected = {f"src/{i}.txt": "".join(f"<{i}:{k}>" for k in range(15)) for i in range(20)}
    streaming = True

    async def keep_flushing(flusher: Flusher) -> None:
        while streaming:
            await flusher.flush()

    try:
        async with anyio.create_task_group() as group:
            for flusher in flushers:
                group.start_soon(keep_flushing, flusher)
            for path in expected:
                await buffer.start_file(path)
            for k in range(15):
                for i, path in enumerate(expected):
                    await buffer.append(path, f"<{i}:{k}>")
            streaming = False
        await flushers[1].flush()
    finally:
        await other_client.aclose()
    assert container.files == {path: text.encode() for path, text in expected.items()}
    assert container.max_active == 1
    assert len(container.archives) > 2  # the flushers really ran while the stream went on


async def test_a_lock_that_expired_during_a_slow_flush_does_not_fail_it(
    buffer: WriteBuffer,
) -> None:
    container = FakeContainer("c1", delay=0.3)
    await _write(buffer, "a.js", "a")
    report = await Flusher(buffer, FakeResolver(container), lock_timeout=0.05).flush()
    assert (report.paths, container.files) == (("a.js",), {"a.js": b"a"})


async def _wait_for_reports(scheduler: FlushScheduler, count: int) -> None:
    await until(lambda: len(scheduler.reports) >= count, f"{count} flush report(s)", 30)


async def test_steady_streaming_still_flushes_within_the_max_wait(buffer: WriteBuffer) -> None:
    container = FakeContainer("c1")
    # The debounce never elapses while chunks keep coming; only the max wait can cause flushes.
    async with FlushScheduler(Flusher(buffer, FakeResolver(container)), 60.0, 0.05) as scheduler:
        await buffer.start_file("a.txt")
        scheduler.note_write()
        for index in range(60):
            await buffer.append("a.txt", f"{index},")
            scheduler.note_write()
            await anyio.sleep(0.01)
        flushed_while_streaming = len(scheduler.reports)
        await scheduler.wait_flushed()
    assert flushed_while_streaming >= 2
    contents = [archive["a.txt"] for archive in container.archives]
    assert contents == sorted(contents, key=len)  # in order, each a longer prefix
    assert all(b"".join(contents[-1:]).startswith(c) for c in contents)
    assert contents[-1] == "".join(f"{i}," for i in range(60)).encode()


async def test_a_burst_of_writes_coalesces_into_one_flush(buffer: WriteBuffer) -> None:
    container = FakeContainer("c1")
    async with FlushScheduler(Flusher(buffer, FakeResolver(container)), 1.0, 60.0) as scheduler:
        await buffer.start_file("a.txt")
        scheduler.note_write()
        for index in range(100):
            await buffer.append("a.txt", f"{index},")
            scheduler.note_write()
        await _wait_for_reports(scheduler, 1)
    assert container.archives == [{"a.txt": "".join(f"{i}," for i in range(100)).encode()}]


async def test_request_now_skips_the_debounce(buffer: WriteBuffer) -> None:
    container = FakeContainer("c1")
    async with FlushScheduler(Flusher(buffer, FakeResolver(container)), 60.0, 60.0) as scheduler:
        await _write(buffer, "a.txt", "done")
        scheduler.note_write()
        scheduler.request_now()
        await _wait_for_reports(scheduler, 1)
    assert container.files == {"a.txt": b"done"}


async def test_wait_flushed_raises_the_flush_error_and_keeps_the_writes(
    buffer: WriteBuffer,
) -> None:
    container = FakeContainer("c1")
    resolver = FakeResolver(container)
    resolver.broken = SandboxUnavailable("no container")
    async with FlushScheduler(Flusher(buffer, resolver), 60.0, 60.0) as scheduler:
        await _write(buffer, "a.txt", "kept")
        scheduler.note_write()
        with pytest.raises(WriteFailed, match=buffer.sandbox_id):
            await scheduler.wait_flushed()
        resolver.broken = None
        await scheduler.wait_flushed()
    assert container.files == {"a.txt": b"kept"}


class RefusingContainer(FakeContainer):
    """Refuses any archive holding ``refused`` (like Docker refusing a name too long)."""

    def __init__(self, name: str, refused: str) -> None:
        super().__init__(name)
        self.refused = refused

    def put_archive(self, path: str, data: bytes) -> bool:
        if self.refused in _regular_files(data):
            raise SandboxError(f"docker: put_archive failed: file name too long: {self.refused!r}")
        return super().put_archive(path, data)


async def test_a_refused_file_is_reported_and_every_other_file_written(
    buffer: WriteBuffer,
) -> None:
    container = RefusingContainer("c1", "bad.js")
    for path in ("a.js", "bad.js", "c.js"):
        await _write(buffer, path, path)
    report = await Flusher(buffer, FakeResolver(container)).flush()
    assert container.files == {"a.js": b"a.js", "c.js": b"c.js"}
    assert report.paths == ("a.js", "c.js")
    assert [f.path for f in report.failed] == ["bad.js"]
    assert "file name too long" in report.failed[0].reason
    assert await buffer.dirty_files() == []  # the refused file is not retried forever


async def test_the_scheduler_tells_which_file_failed(buffer: WriteBuffer) -> None:
    heard: list[FailedWrite] = []

    async def on_failed(failed: FailedWrite) -> None:
        heard.append(failed)

    flusher = Flusher(buffer, FakeResolver(RefusingContainer("c1", "bad.js")))
    async with FlushScheduler(flusher, 60.0, 60.0, on_failed) as scheduler:
        await _write(buffer, "bad.js", "x")
        await _write(buffer, "ok.js", "y")
        scheduler.note_write()
        await scheduler.wait_flushed()
    assert [f.path for f in heard] == ["bad.js"]


class CountingResolver(FakeResolver):
    """A resolver that is always broken and remembers when it was asked."""

    def __init__(self) -> None:
        super().__init__(FakeContainer("never"))
        self.broken = SandboxUnavailable("redis unreachable while flushing")
        self.calls: list[float] = []

    async def __call__(self, sandbox_id: str) -> ArchiveTarget:
        self.calls.append(anyio.current_time())
        return await super().__call__(sandbox_id)


async def test_failed_flushes_are_retried_after_a_growing_delay_not_at_once(
    buffer: WriteBuffer,
) -> None:
    """An outage must not turn the scheduler into a busy loop (it wedged kiln serve)."""
    resolver = CountingResolver()
    async with FlushScheduler(Flusher(buffer, resolver), 0.01, 0.02) as scheduler:
        await _write(buffer, "a.js", "a")
        scheduler.note_write()
        with anyio.fail_after(30):
            while len(resolver.calls) < 5:  # each attempt resolves twice (the replay retry)
                await anyio.sleep(0.05)
    attempts = resolver.calls[::2]
    gaps = [later - earlier for earlier, later in itertools.pairwise(attempts)]
    assert gaps[0] >= RETRY_FIRST_SECONDS * 0.9
    assert gaps[1] >= 2 * RETRY_FIRST_SECONDS * 0.9


# --- real Docker: streaming into a container, and replacing a container that died ---

BASE_IMAGE = "node:20-bookworm-slim"  # any image with sleep and stat; templates build on it


class DockerSandbox:
    """Test containers of one sandbox id; ``resolve`` replaces a dead one (fresh volume too)."""

    def __init__(self, client: docker.DockerClient, sandbox_id: str) -> None:
        self.client = client
        self.sandbox_id = sandbox_id
        self.labels = {LABEL: sandbox_id, "kiln.instance": f"test-writes-{sandbox_id}"}
        self.containers: list[Container] = []
        self.volumes: list[str] = []

    def create(self) -> Container:
        name = f"{self.sandbox_id}-{len(self.volumes)}"
        volume = self.client.volumes.create(name, labels=self.labels)
        self.volumes.append(volume.name)
        container = self.client.containers.run(
            BASE_IMAGE,
            ["sleep", "infinity"],
            detach=True,
            user="1000:1000",
            cap_drop=["ALL"],
            network_mode="none",
            labels=self.labels,
            volumes={volume.name: {"bind": WORKSPACE, "mode": "rw"}},
        )
        self.containers.append(container)
        return container

    async def resolve(self, sandbox_id: str) -> ArchiveTarget:
        current = self.containers[-1]
        await call(current.reload)
        if current.status != "running":
            return await call(self.create)
        return current

    def remove_all(self) -> None:
        for container in self.containers:
            container.remove(force=True)
        for name in self.volumes:
            self.client.volumes.get(name).remove(force=True)


def _generated_files(count: int, seed: int) -> dict[str, str]:
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + " \n\t{}<>&;'\"`é€𝄞"
    return {
        f"gen/d{i % 7}/f{i}.txt": "".join(rng.choices(alphabet, k=rng.randint(0, 400)))
        for i in range(count)
    }


def _chunks(text: str, rng: random.Random) -> Iterator[str]:
    start = 0
    while start < len(text):
        size = rng.randint(1, 32)
        yield text[start : start + size]
        start += size


def _read_tree(container: Container, folder: str) -> dict[str, bytes]:
    stream, _ = container.get_archive(f"{WORKSPACE}/{folder}")
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        out = {}
        for member in tar.getmembers():
            if member.isfile():
                extracted = tar.extractfile(member)
                assert extracted is not None
                out[member.name] = extracted.read()
        return out


async def _stream_files(
    buffer: WriteBuffer,
    scheduler: FlushScheduler,
    files: dict[str, str],
    after_file: Callable[[int], Awaitable[None]] | None = None,
) -> None:
    rng = random.Random(7)
    for index, (path, text) in enumerate(files.items()):
        await buffer.start_file(path)
        scheduler.note_write()
        for chunk in _chunks(text, rng):
            await buffer.append(path, chunk)
            scheduler.note_write()
        scheduler.request_now()  # file_end
        if after_file is not None:
            await after_file(index)
    await scheduler.wait_flushed()


@pytest.fixture
def docker_sandbox() -> Iterator[DockerSandbox]:
    client = connect()
    sandbox = DockerSandbox(client, f"kiln-test-fl-{uuid.uuid4().hex[:10]}")
    try:
        yield sandbox
    finally:
        sandbox.remove_all()
        client.close()


@pytest.mark.docker
async def test_200_streamed_files_arrive_byte_identical(
    buffer: WriteBuffer, docker_sandbox: DockerSandbox
) -> None:
    container = await call(docker_sandbox.create)
    files = _generated_files(200, seed=1)
    flusher = Flusher(buffer, docker_sandbox.resolve)
    async with FlushScheduler(flusher, 0.05, 0.25) as scheduler:
        await _stream_files(buffer, scheduler, files)
    assert await call(_read_tree, container, "gen") == {p: t.encode() for p, t in files.items()}
    assert flusher.archives_written < 400  # batched: far fewer archives than chunks
    stat = ["stat", "-c", "%u %g %a", "gen/d0", "gen/d0/f0.txt"]
    owner = await call(container.exec_run, stat, workdir=WORKSPACE)
    assert owner.output.decode().split("\n")[:2] == ["1000 1000 755", "1000 1000 644"]


@pytest.mark.docker
async def test_a_container_killed_mid_stream_is_replaced_with_every_file(
    buffer: WriteBuffer, docker_sandbox: DockerSandbox
) -> None:
    first = await call(docker_sandbox.create)
    files = _generated_files(200, seed=2)

    async def kill_halfway(index: int) -> None:
        if index == 100:
            await call(first.kill)

    async with FlushScheduler(Flusher(buffer, docker_sandbox.resolve), 0.05, 0.25) as scheduler:
        await _stream_files(buffer, scheduler, files, kill_halfway)
    assert len(docker_sandbox.containers) == 2
    replacement = docker_sandbox.containers[-1]
    assert await call(_read_tree, replacement, "gen") == {p: t.encode() for p, t in files.items()}


@pytest.mark.docker
async def test_racing_flushers_lose_nothing_in_a_real_container(
    buffer: WriteBuffer, docker_sandbox: DockerSandbox, redis_url: str
) -> None:
    container = await call(docker_sandbox.create)
    files = _generated_files(60, seed=3)
    rival_client = redis.asyncio.Redis.from_url(redis_url)  # another worker, in effect
    rival = Flusher(WriteBuffer(rival_client, buffer.sandbox_id, 600), docker_sandbox.resolve)
    streaming = True

    async def keep_flushing() -> None:
        while streaming:
            await rival.flush()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(keep_flushing)
            flusher = Flusher(buffer, docker_sandbox.resolve)
            async with FlushScheduler(flusher, 0.05, 0.25) as scheduler:
                await _stream_files(buffer, scheduler, files)
            streaming = False
    finally:
        await rival_client.aclose()
    assert rival.archives_written > 0
    assert await call(_read_tree, container, "gen") == {p: t.encode() for p, t in files.items()}


@pytest.mark.docker
async def test_a_name_too_long_for_the_filesystem_sinks_no_other_file(
    buffer: WriteBuffer, docker_sandbox: DockerSandbox
) -> None:
    container = await call(docker_sandbox.create)
    long_name = "x" * 260 + ".js"  # over the 255-byte limit of a name on Linux filesystems
    for path in ("src/a.js", f"src/{long_name}", "src/c.js"):
        await _write(buffer, path, "export default 1\n")
    report = await Flusher(buffer, docker_sandbox.resolve).flush()
    assert [f.path for f in report.failed] == [f"src/{long_name}"]
    tree = await call(_read_tree, container, "src")
    assert sorted(tree) == ["src/a.js", "src/c.js"]


async def test_the_lock_is_renewed_while_a_slow_flush_runs(buffer: WriteBuffer) -> None:
    # The lock lives 1 s unless renewed (every third of it), the flush takes 3 s: a second
    # flusher must still wait (a holder that dies stops renewing, so its lock frees within the
    # 1 s). A shorter life failed in CI: a loop stalled ~0.1 s on a loaded host let it lapse.
    container = FakeContainer("c1", delay=3.0)
    await _write(buffer, "a.js", "a")
    flushers = [Flusher(buffer, FakeResolver(container), lock_timeout=1.0) for _ in range(2)]
    async with anyio.create_task_group() as group:
        group.start_soon(flushers[0].flush)
        await until(lambda: container.active == 1, "the first flush writing", 30)
        await _write(buffer, "b.js", "b")
        group.start_soon(flushers[1].flush)
    assert container.max_active == 1
    assert container.files == {"a.js": b"a", "b.js": b"b"}
