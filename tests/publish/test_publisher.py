"""app/publish/publisher.py on a real store, git project store and build storage (vanilla
versions: no sandbox)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.projects.errors import VersionNotFound
from app.projects.git_store import GitProjectStore
from app.projects.store import VersionInfo
from app.publish.errors import NotPublished, PublishBuildFailed
from app.publish.publisher import Publisher
from app.publish.settings import PublishSettings
from app.publish.storage import LocalBuildStorage
from app.store import Store

pytestmark = pytest.mark.anyio


@dataclass
class Setup:
    store: Store
    projects: GitProjectStore
    storage: LocalBuildStorage
    publisher: Publisher
    chat: str


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    store = Store(tmp_path / "kiln.db", "a-test-secret-of-some-length")
    projects = GitProjectStore(tmp_path / "projects")
    storage = LocalBuildStorage(tmp_path / "published")
    settings = PublishSettings(gc_grace_seconds=0.0)  # collect at once
    publisher = Publisher(projects, store, storage, None, settings, project_max_bytes=2**20)
    chat = store.create_chat(store.create_user("ann").id, "site").id
    projects.commit(chat, {"index.html": b"one"}, VersionInfo("r1", 1))
    projects.commit(chat, {"index.html": b"two"}, VersionInfo("r2", 1))
    yield Setup(store, projects, storage, publisher, chat)
    store.close()


def served_bytes(setup: Setup) -> bytes | None:
    row = setup.store.publication(setup.chat)
    assert row is not None
    if row.manifest is None:
        return None
    manifest = setup.storage.manifest(row.manifest)
    assert manifest is not None
    return setup.storage.blob(manifest.files["index.html"].digest)


async def test_publishing_again_moves_the_link_and_collects_the_old_build(setup: Setup) -> None:
    first = await setup.publisher.publish(setup.chat, 1)
    assert served_bytes(setup) == b"one"
    stages: list[str] = []

    async def hear(stage: str) -> None:
        stages.append(stage)

    second = await setup.publisher.publish(setup.chat, "latest", on_stage=hear)
    assert stages == ["building", "storing"]
    assert (second.slug, second.version) == (first.slug, 2)
    assert served_bytes(setup) == b"two"
    assert first.manifest is not None
    assert setup.storage.manifest(first.manifest) is not None  # collected later, not on the path
    await setup.publisher.collect()
    assert setup.storage.manifest(first.manifest) is None  # no link serves it: collected
    assert setup.storage.blob(first.manifest) is None


async def test_unpublishing_keeps_the_slug_and_a_second_one_is_refused(setup: Setup) -> None:
    published = await setup.publisher.publish(setup.chat, 2)
    down = await setup.publisher.unpublish(setup.chat)
    assert (down.slug, down.live) == (published.slug, False)
    assert served_bytes(setup) is None
    await setup.publisher.collect()
    assert list(setup.storage.manifests.iterdir()) == []  # nothing served: all collected
    with pytest.raises(NotPublished):
        await setup.publisher.unpublish(setup.chat)


async def test_a_failed_publish_leaves_the_link_where_it_was(setup: Setup) -> None:
    await setup.publisher.publish(setup.chat, 2)
    setup.projects.commit(setup.chat, {"main.html": b"x"}, VersionInfo("r3", 1))
    with pytest.raises(PublishBuildFailed):
        await setup.publisher.publish(setup.chat, 3)
    with pytest.raises(VersionNotFound):
        await setup.publisher.publish(setup.chat, 7)
    assert served_bytes(setup) == b"two"


async def test_the_state_of_a_chat_never_published_is_not_published(setup: Setup) -> None:
    with pytest.raises(NotPublished, match="never"):
        await setup.publisher.state(setup.chat)


async def test_a_failing_collection_is_logged_and_the_publish_stands(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    setup.storage.manifests.mkdir(parents=True)
    (setup.storage.manifests / f"{'0' * 64}.json").write_bytes(b"junk")  # young: it is read
    patient = Publisher(
        setup.projects, setup.store, setup.storage, None, PublishSettings(), project_max_bytes=2**20
    )
    published = await patient.publish(setup.chat, 2)
    assert published.live
    assert await patient.collect() is None
    assert "collecting published builds failed" in caplog.text
