"""A chat's project and its sandbox kept in step: the sandbox is a cache of the project.

:class:`ProjectSync` is bound to one chat. The run's workspace calls :meth:`ProjectSync.record`
at the end of every turn (and after post-generation fixes, and when the run ends however it
ends) and :meth:`ProjectSync.restore_if_stale` right after it acquired the chat's sandbox,
before the run's first event is handled: a sandbox that does not hold the latest version (a
new one, after the old was reaped or removed) gets it written, then ``npm install`` through the
sandbox's install queue (through kiln's npm proxy) when ``package.json`` differs from what the
fresh sandbox had. Progress is reported as records (``restore``, ``version``) the user sees;
a project file no version can keep (a symlink, a name that is not UTF-8) is told once per run
as a ``warning`` (``file_not_kept``), never dropped in silence. Lock files are recorded and
restored with public ``resolved`` URLs only (:mod:`app.projects.lock_urls`): a version from
before kiln's proxy announced them is repaired.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import anyio.to_thread

from app.projects.errors import ProjectError
from app.projects.lock_urls import public_locks
from app.projects.rules import check_size, shown_name
from app.projects.store import ProjectStore, Version, VersionInfo, VersionRef
from app.projects.workspace_io import read_workspace, write_workspace
from sandbox import RecordSink, SandboxError

PACKAGE_JSON = "package.json"
RESTORE_INSTALL = ("npm", "install")  # the queue adds kiln's npm flags
FILE_NOT_KEPT = "file_not_kept"


class Containers(Protocol):
    """What a sync needs of the sandbox manager: a sandbox's live container."""

    async def container_for(self, sandbox_id: str) -> Any:
        """A running container of the sandbox."""
        ...


Installer = Callable[[str, RecordSink], Awaitable[bool]]
"""``(sandbox id, on_record) -> ok``: install what the workspace's package.json declares."""


async def _ignore(kind: str, record: Mapping[str, Any]) -> None:
    """The default record sink."""


@dataclass(frozen=True)
class ProjectAccess:
    """What the versions API is given: the store, the sandbox manager's containers to write a
    restored version into a live sandbox (``None``: the next run restores it) and the installer
    a restore that changed ``package.json`` runs, as a restore on acquire does."""

    store: ProjectStore
    containers: Containers | None = None
    install: Installer | None = None  # after a restore that changed package.json


class ProjectSync:
    """One chat's project store and sandbox, in step (see the module docstring)."""

    def __init__(
        self,
        store: ProjectStore,
        containers: Containers | None,
        chat: str,
        *,
        max_bytes: int | None = None,
        install: Installer | None = None,
    ) -> None:
        """``max_bytes`` caps what :meth:`record` takes (``None``: no cap, for a reader);
        ``install`` runs after a restore that changed ``package.json``; without
        ``containers`` nothing is read from or written to a sandbox."""
        self.store, self.chat = store, chat
        self._containers, self._install = containers, install
        self._max_bytes = max_bytes
        self._told: set[tuple[str, str]] = set()  # files said not to be kept, and why

    async def _container(self, sandbox_id: str) -> Any:
        if self._containers is None:
            raise ProjectError(f"no access to the sandbox {sandbox_id!r} of chat {self.chat!r}")
        return await self._containers.container_for(sandbox_id)

    async def _in_thread(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))

    async def latest(self) -> Version | None:
        """The newest version, or ``None`` for a chat without a project yet."""
        versions: list[Version] = await self._in_thread(self.store.versions, self.chat)
        return versions[-1] if versions else None

    async def record(
        self, sandbox_id: str, info: VersionInfo, on_record: RecordSink = _ignore
    ) -> Version | None:
        """Commit what the sandbox's workspace holds as a version, if it changed; a project
        over the size cap is reported (``project_too_large``), never raised."""
        try:
            container = await self._container(sandbox_id)
            snapshot = await read_workspace(container)
            await self._say_skipped(snapshot.skipped, on_record)
            files = public_locks(snapshot.files)
            if self._max_bytes is not None:
                check_size(files, self._max_bytes)
            version: Version | None = await self._in_thread(
                self.store.commit, self.chat, files, info
            )
            if version is not None:
                await write_workspace(container, {}, marker=version.id)
        except (ProjectError, SandboxError) as exc:
            await on_record("error", _error_record(exc))
            return None
        if version is not None:
            await on_record("version", version.to_dict())
        else:  # the workspace holds what the latest version holds
            await on_record("version_unchanged", {})
        return version

    async def _say_skipped(self, skipped: Mapping[str, str], on_record: RecordSink) -> None:
        """Tell (once per file and reason) which project files no version can keep."""
        new = {path: why for path, why in skipped.items() if (path, why) not in self._told}
        if not new:
            return
        self._told.update(new.items())
        shown = sorted((shown_name(path), why) for path, why in new.items())
        named = "; ".join(f"{path!r} ({why})" for path, why in shown)
        message = (
            f"{len(new)} file(s) of the app cannot be kept in its versions, so restoring a"
            f" version or a new sandbox will not bring them back: {named}"
        )
        paths = [path for path, _ in shown]
        await on_record("warning", {"code": FILE_NOT_KEPT, "message": message, "paths": paths})

    async def restore_if_stale(
        self, sandbox_id: str, on_record: RecordSink = _ignore
    ) -> Version | None:
        """Write the latest version into the sandbox unless its marker says it holds it (see
        :mod:`app.projects.workspace_io`); the version restored, or ``None`` when there was
        nothing to do (or it failed: reported as an ``error`` record, the run goes on with what
        the sandbox has)."""
        try:
            return await self._restore_latest(sandbox_id, on_record)
        except (ProjectError, SandboxError) as exc:
            await on_record("error", _error_record(exc))
            return None

    async def _restore_latest(self, sandbox_id: str, on_record: RecordSink) -> Version | None:
        latest = await self.latest()
        if latest is None:
            return None
        container = await self._container(sandbox_id)
        snapshot = await read_workspace(container)
        if snapshot.marker == latest.id:
            return None
        current = snapshot.files
        files = public_locks(await self._in_thread(self.store.files, self.chat, latest.number))
        if current == files:
            await write_workspace(container, {}, marker=latest.id)
            return None
        start = {"phase": "started", "version": latest.number, "files": len(files)}
        await on_record("restore", start)
        await _write_difference(container, current, files, latest.id)
        installed = await self._install_if_changed(sandbox_id, current, files, on_record)
        done = {**start, "phase": "done", "installed": installed}
        await on_record("restore", done)
        return latest

    async def _install_if_changed(
        self,
        sandbox_id: str,
        current: Mapping[str, bytes],
        files: Mapping[str, bytes],
        on_record: RecordSink,
    ) -> bool | None:
        """Install the dependencies if ``package.json`` changed; ``None``: nothing to do."""
        if self._install is None or current.get(PACKAGE_JSON) == files.get(PACKAGE_JSON):
            return None
        return await self._install(sandbox_id, on_record)

    async def restore(
        self, sandbox_id: str | None, ref: VersionRef, on_record: RecordSink = _ignore
    ) -> tuple[Version, Version, bool | None]:
        """Make version ``ref`` the newest (recorded as a new version: history only grows) and
        write it into the sandbox, if the chat has one, installing the dependencies when
        ``package.json`` changed; ``(version restored, new version, installed)`` (``installed``
        is ``None`` when no install was needed)."""
        source, version = await self._in_thread(restore_version, self.store, self.chat, ref)
        installed = None
        if sandbox_id is not None and self._containers is not None:
            files = public_locks(await self._in_thread(self.store.files, self.chat, version.number))
            container = await self._container(sandbox_id)
            current = (await read_workspace(container)).files
            await _write_difference(container, current, files, version.id)
            installed = await self._install_if_changed(sandbox_id, current, files, on_record)
        return source, version, installed


def restore_version(store: ProjectStore, chat: str, ref: VersionRef) -> tuple[Version, Version]:
    """Record version ``ref``'s files as the newest version (blocking); ``(source, new)``."""
    source = store.version(chat, ref)
    files = store.files(chat, source.number)
    version = store.commit(
        chat, files, VersionInfo(note=f"restored version {source.number}"), always=True
    )
    assert version is not None  # ``always`` records even an unchanged project
    return source, version


async def _write_difference(
    container: Any, current: Mapping[str, bytes], files: Mapping[str, bytes], version: str
) -> None:
    """Turn the workspace's project files ``current`` into ``files`` of ``version``."""
    changed = {path: data for path, data in files.items() if current.get(path) != data}
    removed = [path for path in current if path not in files]
    await write_workspace(container, changed, removed, marker=version)


def _error_record(exc: Exception) -> dict[str, str]:
    code = getattr(exc, "code", "project_error")
    return {"code": str(code), "message": str(exc), "severity": "recoverable"}


def manager_installer(manager: Any) -> Installer:
    """An :data:`Installer` on a :class:`sandbox.SandboxManager`: ``npm install`` through the
    sandbox's install queue (through kiln's npm proxy), output lines as records."""

    async def install(sandbox_id: str, on_record: RecordSink) -> bool:
        async def output(line: str) -> None:
            await on_record("output", {"line": line})

        await on_record("install_start", {"packages": [], "restore": True})
        try:
            result = await manager.install_queue(sandbox_id).run_npm(RESTORE_INSTALL, output)
        except SandboxError as exc:
            await on_record("error", _error_record(exc))
            return False
        await on_record("install", {"packages": [], "exit_code": result.result.exit_code})
        return bool(result.ok)

    return install
