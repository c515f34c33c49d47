"""Publish a version, unpublish, and keep the stored builds tidy.

:meth:`Publisher.publish`: the version's files (from the project store: the chat's sandbox plays
no part) are built (:func:`app.publish.build.build_version`), every file stored as a blob and
the build as a manifest (:mod:`app.publish.storage`), and only then the chat's link is moved to
the new manifest: one ``UPDATE`` of its publication row. A failed build leaves the link as it
was. :meth:`Publisher.unpublish` sets the row's manifest to nothing: the next request is a 404.
The API runs a publish as a background job (:mod:`app.publish.jobs`), which tells its stages
(:data:`BUILDING`, :data:`STORING`) through ``on_stage``.

Stored builds no link serves are collected (:meth:`Publisher.collect`) in the background, every
``KILN_PUBLISH_GC_INTERVAL`` (:mod:`app.publish.jobs`), never on a publish's path, except those
younger than ``KILN_PUBLISH_GC_GRACE``: a publish in flight stored its build, but has not moved
its link yet. A collection that fails is logged and tried again at the next interval.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeVar

import anyio.to_thread

from app.projects.app_env import AppEnvSource, build_environment
from app.projects.lock_urls import public_locks
from app.projects.store import ProjectStore, VersionRef
from app.publish.build import BuildLimits, BuildSandboxes, OutputSink, build_version
from app.publish.errors import NotPublished, PublishError
from app.publish.settings import PublishSettings
from app.publish.storage import BuildStorage, CollectReport, Manifest, ManifestEntry
from app.store.publications import Publication

log = logging.getLogger(__name__)
T = TypeVar("T")


class PublicationRows(Protocol):
    """What publishing needs of the store (:class:`app.store.publications.PublicationTables`)."""

    def publication(self, chat_id: str) -> Publication | None:
        """The chat's row, or None."""
        ...

    def publication_by_slug(self, slug: str) -> Publication | None:
        """The publication a link names, or None."""
        ...

    def reserve_slug(self, chat_id: str) -> Publication:
        """The chat's row, made if it has none."""
        ...

    def set_publication(self, chat_id: str, manifest: str | None, version: int | None) -> None:
        """Point the chat's link at ``manifest`` (None: unpublished)."""
        ...

    def published_manifests(self) -> set[str]:
        """Every manifest a link serves."""
        ...


async def _ignore(line: str) -> None:
    """The default output sink."""


async def _no_stage(stage: str) -> None:
    """The default stage sink."""


StageSink = Callable[[str], Awaitable[None]]
BUILDING = "building"  # the version's production build (a sandbox's install and build)
STORING = "storing"  # its files stored, then the link moved


class Publisher:
    """Publishing of chats' versions (module docstring)."""

    def __init__(
        self,
        projects: ProjectStore,
        rows: PublicationRows,
        storage: BuildStorage,
        sandboxes: BuildSandboxes | None,
        settings: PublishSettings,
        *,
        project_max_bytes: int,
        app_env: AppEnvSource | None = None,
    ) -> None:
        """Build with ``sandboxes`` (None: only apps that need no build can be published) and
        the chats' public variables from ``app_env`` (None: none)."""
        self.projects, self.rows, self.storage = projects, rows, storage
        self.app_env = app_env
        self.sandboxes, self.settings = sandboxes, settings
        self.limits = BuildLimits(settings.max_bytes, settings.build_seconds, project_max_bytes)

    async def publish(
        self,
        chat: str,
        ref: VersionRef,
        *,
        owner: str = "",
        on_output: OutputSink = _ignore,
        on_stage: StageSink = _no_stage,
    ) -> Publication:
        """Build version ``ref`` of ``chat`` and move the chat's link to it; the publication.
        ``on_stage`` hears :data:`BUILDING`, then :data:`STORING`."""
        await on_stage(BUILDING)
        version = await _in_thread(self.projects.version, chat, ref)
        stored = await _in_thread(self.projects.files, chat, version.number)
        variables = await _in_thread(build_environment, self.app_env, chat) if self.app_env else {}
        built = await build_version(
            self.sandboxes,
            public_locks(stored),
            self.limits,
            owner=owner,
            on_output=on_output,
            variables=variables,
        )
        await on_stage(STORING)
        manifest = await _in_thread(self._store, built, chat, version.number)
        await _in_thread(self.rows.reserve_slug, chat)
        await _in_thread(self.rows.set_publication, chat, manifest, version.number)
        return await self.state(chat)

    async def unpublish(self, chat: str) -> Publication:
        """Take the chat's link down (it answers 404 from now on); ``NotPublished`` if it
        serves nothing."""
        found = await _in_thread(self.rows.publication, chat)
        if found is None or not found.live:
            raise NotPublished(f"chat {chat!r} is not published")
        await _in_thread(self.rows.set_publication, chat, None, None)
        return await self.state(chat)

    async def state(self, chat: str) -> Publication:
        """The chat's publication; ``NotPublished`` if it never was."""
        found = await _in_thread(self.rows.publication, chat)
        if found is None:
            raise NotPublished(f"chat {chat!r} was never published")
        return found

    async def collect(self) -> CollectReport | None:
        """Remove the stored builds no link serves (module docstring); None if it failed."""
        try:
            keep = await _in_thread(self.rows.published_manifests)
            return await _in_thread(self.storage.collect, keep, self.settings.gc_grace_seconds)
        except (PublishError, OSError) as exc:
            log.warning("collecting published builds failed: %s", exc)
            return None

    def _store(self, built: Mapping[str, bytes], chat: str, version: int) -> str:
        """Store every file, then the manifest naming them (blocking); its digest."""
        entries = {
            path: ManifestEntry(self.storage.put_blob(data), len(data))
            for path, data in built.items()
        }
        return self.storage.put_manifest(Manifest(entries, chat, version))


async def _in_thread(fn: Callable[..., T], *args: Any) -> T:
    return await anyio.to_thread.run_sync(functools.partial(fn, *args))
