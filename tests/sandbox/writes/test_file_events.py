"""File events into the write buffer: fence cleanup and template config files (fake container)."""

from __future__ import annotations

import io
import json
import tarfile
import uuid
from collections.abc import AsyncIterator, Mapping, Set

import anyio
import pytest
import redis.asyncio

from sandbox.errors import SandboxUnavailable
from sandbox.images.templates import get_template
from sandbox.writes.file_events import FileEventWriter, WriteNotice
from sandbox.writes.flush import ArchiveTarget, Flusher, FlushScheduler
from sandbox.writes.write_buffer import STAGING, WriteBuffer

pytestmark = pytest.mark.anyio

TEMPLATE_PACKAGE_JSON = json.dumps({"name": "app", "dependencies": {"react": "^18.3.1"}})


class RecordingContainer:
    """Keeps the files of every archive it receives."""

    id = "fake"

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def put_archive(self, path: str, data: bytes) -> bool:
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in tar.getmembers():
                extracted = tar.extractfile(member) if member.isfile() else None
                if extracted is not None:
                    self.files[member.name] = extracted.read()
        return True


@pytest.fixture
def container() -> RecordingContainer:
    return RecordingContainer()


@pytest.fixture
async def writer(
    client: redis.asyncio.Redis, container: RecordingContainer
) -> AsyncIterator[FileEventWriter]:
    buffer = WriteBuffer(client, f"fe-{uuid.uuid4().hex[:10]}", ttl_seconds=600)

    async def resolve(sandbox_id: str) -> ArchiveTarget:
        return container

    async def read_workspace(path: str) -> str | None:
        return TEMPLATE_PACKAGE_JSON if path == "package.json" else None

    async with FlushScheduler(Flusher(buffer, resolve), 60.0, 60.0) as scheduler:
        yield FileEventWriter(buffer, scheduler, get_template("vite-react"), read_workspace)


async def _stream(writer: FileEventWriter, path: str, text: str) -> list[WriteNotice]:
    await writer.start(path)
    for start in range(0, len(text), 5):
        await writer.append(path, text[start : start + 5])
    notices = await writer.end(path)
    await writer.scheduler.wait_flushed()
    return notices


async def test_a_fence_wrapping_the_file_is_stripped(
    writer: FileEventWriter, container: RecordingContainer
) -> None:
    assert await _stream(writer, "src/a.jsx", "```jsx\nexport const a = 1;\n```\n") == []
    assert container.files == {"src/a.jsx": b"export const a = 1;\n"}
    assert writer.completed == ["src/a.jsx"]


async def test_package_json_dependencies_are_merged_and_reported(
    writer: FileEventWriter, container: RecordingContainer
) -> None:
    proposed = {"name": "mine", "dependencies": {"react": "^17", "zustand": "^4.5.0"}}
    notices = await _stream(writer, "package.json", json.dumps(proposed))
    merged = json.loads(container.files["package.json"])
    assert merged["dependencies"] == {"react": "^18.3.1", "zustand": "^4.5.0"}
    assert merged["name"] == "app"
    (notice,) = notices
    assert notice.code == "config_merged"
    assert notice.packages == ("zustand@^4.5.0",)
    assert "'name'" in notice.message


async def test_other_config_files_are_refused_and_never_written(
    writer: FileEventWriter, container: RecordingContainer
) -> None:
    await _stream(writer, "src/ok.js", "ok\n")
    (notice,) = await _stream(writer, "vite.config.js", "export default {}\n")
    assert notice.code == "config_refused"
    assert "'vite.config.js'" in notice.message
    assert container.files == {"src/ok.js": b"ok\n"}
    assert await writer.buffer.read("vite.config.js") is None
    assert writer.completed == ["src/ok.js"]


async def test_an_unfinished_config_file_is_dropped(writer: FileEventWriter) -> None:
    await writer.start("vite.config.js")
    await writer.append("vite.config.js", "export")
    await writer.abandon()
    assert await writer.buffer.read("vite.config.js") is None
    assert await writer.buffer.all_files() == []


class CountingBuffer(WriteBuffer):
    """Counts Redis write transactions; can be told to fail the next batch."""

    def __init__(self, client: redis.asyncio.Redis) -> None:
        super().__init__(client, f"fe-{uuid.uuid4().hex[:10]}", ttl_seconds=600)
        self.batches = 0
        self.fail_next = False

    async def write_at(
        self, pieces: Mapping[str, tuple[int, bytes]], held: Set[str] = frozenset()
    ) -> None:
        if self.fail_next:
            self.fail_next = False
            raise SandboxUnavailable("redis unreachable while buffering")
        self.batches += 1
        await super().write_at(pieces, held)


@pytest.fixture
async def counted(
    client: redis.asyncio.Redis, container: RecordingContainer
) -> AsyncIterator[tuple[FileEventWriter, CountingBuffer]]:
    buffer = CountingBuffer(client)

    async def resolve(sandbox_id: str) -> ArchiveTarget:
        return container

    async def read_workspace(path: str) -> str | None:
        return None

    holder: list[FileEventWriter] = []
    flusher = Flusher(buffer, resolve)
    async with FlushScheduler(flusher, 60.0, 60.0, before_flush=lambda: holder[0].push()) as s:
        holder.append(FileEventWriter(buffer, s, get_template("vite-react"), read_workspace))
        yield holder[0], buffer


async def test_chunks_reach_redis_together_not_one_transaction_each(
    counted: tuple[FileEventWriter, CountingBuffer],
) -> None:
    writer, buffer = counted
    await writer.start("src/a.js")
    await writer.start("src/b.js")
    for index in range(200):
        await writer.append("src/a.js" if index % 2 else "src/b.js", f"{index};")
    assert await buffer.read("src/a.js") == b""  # gathered, not yet written
    await writer.push()
    assert buffer.batches == 1
    assert await buffer.read("src/a.js") == "".join(f"{i};" for i in range(1, 200, 2)).encode()
    assert await buffer.read("src/b.js") == "".join(f"{i};" for i in range(0, 200, 2)).encode()


async def test_a_failed_push_keeps_every_chunk_in_order(
    counted: tuple[FileEventWriter, CountingBuffer],
) -> None:
    writer, buffer = counted
    await writer.start("a.js")
    await writer.append("a.js", "ab")
    buffer.fail_next = True
    with pytest.raises(SandboxUnavailable):
        await writer.push()
    await writer.append("a.js", "cd")
    await writer.push()
    assert await buffer.read("a.js") == b"abcd"


async def test_a_flush_while_the_file_streams_writes_what_was_gathered(
    counted: tuple[FileEventWriter, CountingBuffer], container: RecordingContainer
) -> None:
    writer, _ = counted
    await writer.start("src/App.jsx")
    await writer.append("src/App.jsx", "export default ")
    await writer.append("src/App.jsx", "function App() {")
    await writer.scheduler.wait_flushed()  # the file has not ended: a mid-stream flush
    assert container.files == {f"{STAGING}/src/App.jsx": b"export default function App() {"}
    await writer.append("src/App.jsx", "}")
    await writer.end("src/App.jsx")
    await writer.scheduler.wait_flushed()  # whole: written at its place
    assert container.files["src/App.jsx"] == b"export default function App() {}"


async def test_a_push_whose_reply_never_came_is_not_stored_twice(
    writer: FileEventWriter, container: RecordingContainer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Redis applied the pipeline, then the push was cancelled before its reply: pushed again,
    # the chunk must land once (kiln issue 21: a cancel doubled `.items.map((` in a file).
    real = redis.asyncio.client.Pipeline.execute

    async def applied_then_cancelled(self: redis.asyncio.client.Pipeline) -> list[object]:
        await real(self)
        raise anyio.get_cancelled_exc_class()()

    await writer.start("src/store.js")
    await writer.append("src/store.js", "persist(state")
    await writer.append("src/store.js", ".items.map((")
    monkeypatch.setattr(redis.asyncio.client.Pipeline, "execute", applied_then_cancelled)
    with pytest.raises(anyio.get_cancelled_exc_class()):
        await writer.push()
    monkeypatch.undo()
    await writer.append("src/store.js", "i) => i));")
    await writer.end("src/store.js")
    await writer.scheduler.wait_flushed()
    assert container.files["src/store.js"] == b"persist(state.items.map((i) => i));"


async def test_a_file_never_ended_is_rolled_back_and_never_written_at_its_place(
    writer: FileEventWriter, container: RecordingContainer
) -> None:
    await _stream(writer, "src/done.js", "export const done = 1;\n")
    await writer.start("src/half.js")
    await writer.append("src/half.js", "export const half = (")
    await writer.start("package.json")
    await writer.append("package.json", '{"dependencies": {')
    assert await writer.roll_back() == ["src/half.js", "package.json"]
    await writer.scheduler.wait_flushed()
    assert container.files == {
        "src/done.js": b"export const done = 1;\n",
        f"{STAGING}/src/half.js": b"export const half = (",
    }
    assert await writer.roll_back() == []  # said once
