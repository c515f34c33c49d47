"""A chat's project and its sandbox kept in step: the sandbox is a cache of the project.

:class:`ProjectSync` is bound to one chat. The run's workspace calls :meth:`ProjectSync.record`
at the end of every turn (and after post-generation fixes, and when the run ends however it
ends) and :meth:`ProjectSync.restore_if_stale` right after it acquired the chat's sandbox,
before the run's first event is handled: a sandbox that does not hold the latest version (a
new one, after the old was reaped or removed) gets it written, then ``npm install`` through the
sandbox's install queue (through kiln's npm proxy) when ``package.json`` differs from what the
fresh sandbox had and its ``node_modules`` does not already hold what the version's lock asks
for (:mod:`app.projects.installed_match`: a pooled sandbox of the template often does).
Progress is reported as records (``restore``, ``version``) the user sees;
a project file no version can keep (a symlink, a name that is not UTF-8) is told once per run
as a ``warning`` (``file_not_kept``), never dropped in silence. Lock files are recorded and
restored with public ``resolved`` URLs only (:mod:`app.projects.lock_urls`): a version from
before kiln's proxy announced them is repaired.

Every read of the workspace is bounded by the project cap (:mod:`app.projects.workspace_io`);
a restore into a workspace over it writes the version whole and removes the files it does not
hold. One chat's syncs (a run's records, its restore on acquire, the API's restores) take turns
(:func:`chat_turn`): twenty restores of one chat at once read and write one after the other,
not twenty workspaces at once.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.to_thread
from anyio.lowlevel import RunVar

from app.projects.errors import ProjectError
from app.projects.git_remote import RemoteLimits
from app.projects.installed_match import install_changes_nothing
from app.projects.lock_urls import public_locks
from app.projects.rules import is_source, safe_path, shown_name, unkeepable_name
from app.projects.store import ProjectStore, Version, VersionInfo, VersionRef
from app.projects.workspace_io import (
    DEFAULT_MAX_BYTES,
    Snapshot,
    read_installed_record,
    read_workspace,
    write_workspace,
)
from sandbox import RecordSink, SandboxError, default_images_dir, warm_dev_server

PACKAGE_JSON = "package.json"
RESTORE_INSTALL = ("npm", "install")  # the queue adds kiln's npm flags
# The module warm-up, waiting for the dev server included: it only saves time, so nothing waits
# for it longer than this.
WARMUP_LIMIT_SECONDS = 30.0
FILE_NOT_KEPT = "file_not_kept"
# chat id -> [its lock, how many hold or wait for it]: per event loop, dropped when unused.
_CHAT_TURNS: RunVar[dict[str, tuple[anyio.Lock, list[int]]]] = RunVar("kiln_chat_turns")


@asynccontextmanager
async def chat_turn(chat: str) -> AsyncIterator[None]:
    """Hold ``chat``'s turn: one sync of a chat's workspace at a time (in this process)."""
    try:
        turns = _CHAT_TURNS.get()
    except LookupError:
        turns = {}
        _CHAT_TURNS.set(turns)
    lock, users = turns.setdefault(chat, (anyio.Lock(), [0]))
    users[0] += 1
    try:
        async with lock:
            yield
    finally:
        users[0] -= 1
        if not users[0]:
            del turns[chat]


class Containers(Protocol):
    """What a sync needs of the sandbox manager: a sandbox's live container."""

    async def container_for(self, sandbox_id: str) -> Any:
        """A running container of the sandbox."""
        ...


class SandboxStarter(Protocol):
    """What an import needs of the sandbox manager: the chat's sandbox, and letting it go."""

    async def acquire(self, chat: str, owner: str, template: str) -> Any:
        """The chat's sandbox of ``template`` (a :class:`sandbox.Sandbox`)."""
        ...

    async def release(self, sandbox_id: str) -> None:
        """The caller is done with the sandbox for now."""
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
    max_bytes: int = DEFAULT_MAX_BYTES  # what a read of a workspace takes at most
    starter: SandboxStarter | None = None  # an imported project's first sandbox
    remote_limits: RemoteLimits = field(default_factory=RemoteLimits)  # pushes and imports
    images_dir: Path = field(default_factory=default_images_dir)  # the templates' files

    def sync(self, chat: str) -> ProjectSync:
        """``chat``'s project and sandbox, kept in step with these."""
        return ProjectSync(
            self.store, self.containers, chat, max_bytes=self.max_bytes, install=self.install
        )


@dataclass(frozen=True, slots=True)
class InStep:
    """``sandbox``'s project files are exactly ``files``, those of version ``version`` (an id)."""

    sandbox: str
    version: str
    files: Mapping[str, bytes]

    def holds(self, sandbox_id: str, version: Version) -> bool:
        """Whether ``sandbox_id`` is in step with ``version``."""
        return (self.sandbox, self.version) == (sandbox_id, version.id)


class ProjectSync:
    """One chat's project store and sandbox, in step (see the module docstring)."""

    def __init__(
        self,
        store: ProjectStore,
        containers: Containers | None,
        chat: str,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        install: Installer | None = None,
    ) -> None:
        """``max_bytes`` caps what a read of the workspace takes (:meth:`record` refuses a
        project over it); ``install`` runs after a restore that changed ``package.json``;
        without ``containers`` nothing is read from or written to a sandbox."""
        self.store, self.chat = store, chat
        self._containers, self._install = containers, install
        self._max_bytes = max_bytes
        self._told: set[tuple[str, str]] = set()  # files said not to be kept, and why
        # A sandbox whose project files are a version's, as this sync last wrote, read or
        # checked them (a record from known files builds on it).
        self._in_step: InStep | None = None

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
        self,
        sandbox_id: str,
        info: VersionInfo,
        on_record: RecordSink = _ignore,
        *,
        written: Mapping[str, bytes] | None = None,
    ) -> Version | None:
        """Commit what the sandbox's workspace holds as a version, if it changed; a project
        over the size cap is reported (``project_too_large``), never raised.

        ``written``: the files kiln wrote into the sandbox since it was last in step with a
        version, when nothing else can have changed its project files (a session that only
        wrote files). If that version is still the latest, the new one is that version with
        ``written`` on top, and the workspace is not read (its ``find`` and ``tar`` would take
        the sandbox's one CPU from the build beside it); otherwise the workspace is read."""
        try:
            async with chat_turn(self.chat):
                container = await self._container(sandbox_id)
                known = None if written is None else await self._known(sandbox_id, written)
                files = await self._read(container, on_record) if known is None else known
                version: Version | None = await self._in_thread(
                    self.store.commit, self.chat, files, info
                )
                if version is not None:
                    await write_workspace(container, {}, marker=version.id)
                latest = version or await self.latest()  # unchanged: the latest's files
                self._in_step = None if latest is None else InStep(sandbox_id, latest.id, files)
        except (ProjectError, SandboxError) as exc:
            self._in_step = None
            await on_record("error", _error_record(exc))
            return None
        if version is not None:
            await on_record("version", version.to_dict())
        else:  # the workspace holds what the latest version holds
            await on_record("version_unchanged", {})
        return version

    def in_step_files(self, sandbox_id: str) -> Mapping[str, bytes] | None:
        """The project files ``sandbox_id`` holds, when this sync knows them (it restored,
        recorded or checked them: see :meth:`record`); ``None`` otherwise."""
        in_step = self._in_step
        return in_step.files if in_step is not None and in_step.sandbox == sandbox_id else None

    async def _read(self, container: Any, on_record: RecordSink) -> dict[str, bytes]:
        """The workspace's project files, read (lock files with public URLs only)."""
        snapshot = await read_workspace(container, self._max_bytes)
        await self._say_skipped(snapshot.skipped, on_record)
        return public_locks(snapshot.files)

    async def _known(
        self, sandbox_id: str, written: Mapping[str, bytes]
    ) -> dict[str, bytes] | None:
        """The sandbox's project files from what this sync knows: the version it is in step
        with, if that is the latest, with ``written`` on top; ``None`` when they must be read
        (not in step, a name no version keeps, past the size cap: the read says why)."""
        latest, in_step = await self.latest(), self._in_step
        if latest is None or in_step is None or not in_step.holds(sandbox_id, latest):
            return None
        if any(safe_path(path) != path or unkeepable_name(path) for path in written):
            return None
        files = dict(in_step.files)
        files.update((path, data) for path, data in written.items() if is_source(path))
        if sum(len(data) for data in files.values()) > self._max_bytes:
            return None
        return public_locks(files)

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
            async with chat_turn(self.chat):
                return await self._restore_latest(sandbox_id, on_record)
        except (ProjectError, SandboxError) as exc:
            await on_record("error", _error_record(exc))
            return None

    async def _restore_latest(self, sandbox_id: str, on_record: RecordSink) -> Version | None:
        self._in_step = None
        latest = await self.latest()
        if latest is None:
            return None
        container = await self._container(sandbox_id)
        snapshot = await read_workspace(container, self._max_bytes, whole=False)
        files = public_locks(await self._in_thread(self.store.files, self.chat, latest.number))
        if snapshot.marker == latest.id:
            # The marker says in step; the listing agrees (the same names and sizes) unless a
            # change was left unrecorded (a project over the cap) or the app wrote files itself.
            if snapshot.sizes == {path: len(data) for path, data in files.items()}:
                self._in_step = InStep(sandbox_id, latest.id, files)
            return None
        if snapshot.complete and snapshot.files == files:
            await write_workspace(container, {}, marker=latest.id)
            self._in_step = InStep(sandbox_id, latest.id, files)
            return None
        start = {"phase": "started", "version": latest.number, "files": len(files)}
        await on_record("restore", start)
        await write_difference(container, snapshot, files, latest.id)
        installed = await self._install_if_changed(
            container, sandbox_id, snapshot, files, on_record
        )
        if installed is None:  # an install may rewrite package.json and the lock file
            self._in_step = InStep(sandbox_id, latest.id, files)
        done = {**start, "phase": "done", "installed": installed}
        await on_record("restore", done)
        return latest

    async def _install_if_changed(
        self,
        container: Any,
        sandbox_id: str,
        snapshot: Snapshot,
        files: Mapping[str, bytes],
        on_record: RecordSink,
    ) -> bool | None:
        """Install the dependencies if ``package.json`` changed (or the workspace was too large
        to read it) and ``node_modules`` does not already hold what the version's lock asks
        for (:mod:`app.projects.installed_match`); ``None``: nothing to do."""
        if self._install is None:
            return None
        if snapshot.complete:
            changed = snapshot.files.get(PACKAGE_JSON) != files.get(PACKAGE_JSON)
        else:
            changed = PACKAGE_JSON in files or PACKAGE_JSON in snapshot.sizes
        if not changed:
            return None
        if install_changes_nothing(files, await read_installed_record(container)):
            return None  # the template's (or the volume's) packages are the version's
        return await self._install(sandbox_id, on_record)

    async def restore(
        self, sandbox_id: str | None, ref: VersionRef, on_record: RecordSink = _ignore
    ) -> tuple[Version, Version, bool | None]:
        """Make version ``ref`` the newest (recorded as a new version: history only grows) and
        write it into the sandbox, if the chat has one, installing the dependencies when
        ``package.json`` changed; ``(version restored, new version, installed)`` (``installed``
        is ``None`` when no install was needed)."""
        async with chat_turn(self.chat):
            source, version = await self._in_thread(restore_version, self.store, self.chat, ref)
            installed = None
            if sandbox_id is not None and self._containers is not None:
                stored = await self._in_thread(self.store.files, self.chat, version.number)
                files = public_locks(stored)
                container = await self._container(sandbox_id)
                snapshot = await read_workspace(container, self._max_bytes, whole=False)
                self._in_step = None
                await write_difference(container, snapshot, files, version.id)
                installed = await self._install_if_changed(
                    container, sandbox_id, snapshot, files, on_record
                )
                if installed is None:
                    self._in_step = InStep(sandbox_id, version.id, files)
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


async def write_difference(
    container: Any, snapshot: Snapshot, files: Mapping[str, bytes], version: str
) -> None:
    """Turn the workspace's project files (``snapshot``) into ``files`` of ``version``: only
    the files that differ, or all of them when the snapshot holds no contents."""
    current = snapshot.files
    changed = {
        path: data
        for path, data in files.items()
        if not snapshot.complete or current.get(path) != data
    }
    removed = [path for path in snapshot.sizes if path not in files]
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
        if result.ok:  # the restored preview's first load meets the packages just installed
            await warm_preview_of(manager, sandbox_id)
        return bool(result.ok)

    return install


async def warm_preview_of(manager: Any, sandbox_id: str) -> None:
    """Once its dev server is ready, the sandbox's module graph walked
    (sandbox/preview/module_warmup.py), within :data:`WARMUP_LIMIT_SECONDS`; a dev server that
    is not ready is said where the preview is shown, not here."""
    with anyio.move_on_after(WARMUP_LIMIT_SECONDS):
        try:
            sandbox = await manager.wait_ready(sandbox_id)
        except SandboxError:
            return
        await warm_dev_server(sandbox.dev_url)
