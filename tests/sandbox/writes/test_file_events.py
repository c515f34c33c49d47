"""File events into the write buffer: fence cleanup and template config files (fake container)."""

from __future__ import annotations

import io
import json
import tarfile
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio

from sandbox.images.templates import get_template
from sandbox.writes.file_events import FileEventWriter, WriteNotice
from sandbox.writes.flush import ArchiveTarget, Flusher, FlushScheduler
from sandbox.writes.write_buffer import WriteBuffer

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
