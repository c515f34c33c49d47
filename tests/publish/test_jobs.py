"""app/publish/jobs.py on a real store, git project store and build storage: a stopping server
ends its running jobs in words, and stored builds no link serves are collected on the interval.
(The API's side, one per chat, the hourly limit and a dead job: tests/api/test_publications.py;
a real build through the job: tests/web/test_publish.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from app.projects.git_store import GitProjectStore
from app.projects.store import VersionInfo
from app.publish.jobs import PublishJobs
from app.publish.publisher import Publisher
from app.publish.settings import PublishSettings
from app.publish.storage import LocalBuildStorage, Manifest
from app.store import Store
from tests.api.test_publications import GatedSandboxes
from tests.waiting import until

pytestmark = pytest.mark.anyio

VITE = {"package.json": b'{"devDependencies": {"vite": "5.4.0"}}', "index.html": b"<p>"}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store(tmp_path / "kiln.db", "a-test-secret-of-some-length")
    yield store
    store.close()


def jobs_of(store: Store, tmp_path: Path, settings: PublishSettings) -> tuple[PublishJobs, str]:
    projects = GitProjectStore(tmp_path / "projects")
    storage = LocalBuildStorage(tmp_path / "published")
    publisher = Publisher(
        projects,
        store,
        storage,
        GatedSandboxes(),  # its gate never opens: the job stays at ``building``
        settings,
        project_max_bytes=2**20,
    )
    chat = store.create_chat(store.create_user("ann").id, "site").id
    projects.commit(chat, VITE, VersionInfo("r1", 1))
    return PublishJobs(publisher, store), chat


def stage_of(store: Store, job_id: str) -> str:
    found = store.publish_job(job_id)
    return found.stage if found else ""


async def test_a_stopping_server_ends_its_running_job_as_interrupted(
    store: Store, tmp_path: Path
) -> None:
    jobs, chat = jobs_of(store, tmp_path, PublishSettings())
    async with anyio.create_task_group() as tasks:
        await tasks.start(jobs.run)
        job = await jobs.submit(chat, 1, owner="ann")
        await until(lambda: stage_of(store, job.id) == "building", "the build to start")
        tasks.cancel_scope.cancel()
    ended = store.publish_job(job.id)
    assert ended is not None
    assert (ended.stage, ended.active, ended.code) == ("failed", False, "publish_interrupted")
    assert "stopped before it ended" in (ended.message or "")


async def test_unserved_builds_are_collected_on_the_interval(store: Store, tmp_path: Path) -> None:
    settings = PublishSettings(gc_grace_seconds=0.0, gc_interval_seconds=1.0)
    jobs, _ = jobs_of(store, tmp_path, settings)
    storage = jobs.publisher.storage
    digest = storage.put_manifest(Manifest({}, "nobody", 1))
    async with anyio.create_task_group() as tasks:
        await tasks.start(jobs.run)
        await until(lambda: storage.manifest(digest) is None, "the collection", limit=30)
        tasks.cancel_scope.cancel()
