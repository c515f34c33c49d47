"""Where a run's sandbox events go: a sandbox acquired ahead of need, or a stand-in in tests.

The loop only needs :class:`~app.postgen.pipeline.EventTarget` (``handle(event)``,
``end_edit(event)``, ``finish()``, ...), which
:class:`sandbox.session.SandboxSession` is. :class:`SandboxWorkspace` wires a session to the
chat's sandbox the first time an event needs one. A run that will likely write code starts
acquiring it when the run starts (:meth:`SandboxWorkspace.acquire_early`), while the provider
thinks, so its first file does not wait for a container; an answer that needed none releases it
unused, and one whose model picked another template trades it in. Given the run's record sink
(an edit's, whose chat has a project), the early sandbox is also told (``sandbox_ready``) and
restored to the chat's latest version at once (a sandbox that was reaped or parked: issue
24), so the restore and its install run while the provider thinks instead of after the
answer's first file; a run closed before its first event cancels that restore (the next one
does it again: the version marker is written last).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol

import anyio
from anyio.abc import TaskGroup

from app.agent.context import ExistingProject, existing_project, guess_template
from app.agent.render_ahead import RenderAhead
from app.postgen.pipeline import EventTarget
from app.postgen.template_workspace import read_template_workspace
from app.projects.store import VersionInfo
from app.projects.sync import ProjectSync, warm_preview_of
from sandbox import (
    DEFAULT_TEMPLATE,
    RENDER_SKIP_DISABLED,
    TEMPLATES,
    NestedExits,
    RecordSink,
    RenderCheckSettings,
    RenderReport,
    Sandbox,
    SandboxError,
    SandboxManager,
    SandboxSession,
    SessionLog,
    get_template,
    manager_session,
)

CLOSE_LIMIT_SECONDS = 600.0  # waiting for the last installs and flushes when a run ends
RECENT_VERSIONS = 2  # the files these last versions changed are "changed in the last turns"
# A first message that is only a greeting or thanks builds nothing; anything else (a question
# about code included: most answers to "how do I ..." write files) gets its sandbox early.
SMALL_TALK = re.compile(
    r"(hi|hello|hey|thanks|thank you|thx|ok|okay|bye|good (morning|afternoon|evening))"
    r"( there| kiln)?[\s!.?]*",
    re.IGNORECASE,
)


def likely_to_build(request: str, has_project: bool) -> bool:
    """Whether a run for ``request`` will probably write code (its sandbox is then acquired
    early): always for a chat whose project has files, else unless it is small talk."""
    return has_project or not SMALL_TALK.fullmatch(request.strip())


@dataclass(slots=True)
class _EarlyAcquire:
    """A sandbox being acquired ahead of need, for ``template``."""

    template: str
    done: anyio.Event = field(default_factory=anyio.Event)
    sandbox: Sandbox | None = None
    ready: bool = False  # told and restored already (the run's record sink was given)
    restoring: anyio.CancelScope = field(default_factory=anyio.CancelScope)


@dataclass(slots=True)
class _Warmed:
    """A warm-up of the dev server for the files at ``source_state``, and whether the render
    check was started after it."""

    source_state: int
    checked: bool
    done: anyio.Event = field(default_factory=anyio.Event)


class Workspace(Protocol):
    """A run's sandbox, acquired lazily."""

    sandbox_id: str | None
    dev_url: str | None

    @property
    def template(self) -> str:
        """The template the sandbox has or will have."""
        ...

    async def target(self, on_record: RecordSink) -> EventTarget:
        """The event target, acquiring the sandbox on the first call."""
        ...

    def prefer_template(self, name: str) -> None:
        """A template the model named; used if nothing was chosen explicitly and no sandbox
        exists yet."""
        ...

    def acquire_early(self, tasks: TaskGroup, on_record: RecordSink | None = None) -> None:
        """Start acquiring the sandbox for the template known now in ``tasks``, before an event
        needs it (a failure is left for :meth:`target` to meet and report); with ``on_record``
        it is also told and restored to the chat's latest version at once."""
        ...

    async def close(self, *, abandon: bool = False) -> SessionLog | None:
        """Finish pending work (flush files; with ``abandon``, leave installs and commands) and
        release the sandbox; the session's log, if one was opened."""
        ...

    async def check_render(self) -> RenderReport | None:
        """Open the sandbox's app in the render browser once its build passed (issue 23);
        ``None`` when there is no sandbox. Never raises for the check's own failures."""
        ...

    async def warm_preview(self, check_follows: bool = False) -> None:
        """Once the turn's files are final, have the dev server find what they import before a
        page loads them (:mod:`sandbox.preview.module_warmup`); bounded, never raises. With
        ``check_follows`` (post-generation will check the render), the render check then starts
        in the background, so that it runs beside the build; :meth:`check_render` takes its
        report if no file changed since."""
        ...

    def files_ended(self, check_follows: bool) -> None:
        """The answer's files so far are complete (``sandbox_end``) while the stream goes on:
        do :meth:`warm_preview`'s work in the background once they are in, without ending
        anything being written; :meth:`warm_preview` at the stream's end then waits for it
        instead of starting over when no file changed since."""
        ...

    async def record_version(self, turn: int, note: str = "") -> None:
        """Wait until the project's files are final (pending installs, flushes and commands
        other than the template's build, which may still run), then record what the sandbox
        holds as a version of the chat's project if it changed (nothing without a project or
        sandbox)."""
        ...

    async def existing_project(self) -> ExistingProject | None:
        """The chat's project when it has files beyond its template's (a message is then an
        edit); its template becomes the workspace's unless one was chosen explicitly."""
        ...


class SandboxWorkspace:
    """A chat's sandbox from the :class:`SandboxManager`, driven by a :class:`SandboxSession`."""

    def __init__(
        self,
        manager: SandboxManager,
        template: str | None,
        *,
        chat: str,
        owner: str,
        project: ProjectSync | None = None,
        run: str = "",
    ) -> None:
        """``template`` is the explicit choice; ``None`` lets the model's answer pick it.
        With a ``project``, the sandbox is restored from it on acquire and each turn that
        changed files is recorded in it (as run ``run``)."""
        self._manager = manager
        self._explicit = template is not None
        self._template = get_template(template or DEFAULT_TEMPLATE)
        self._chat, self._owner = chat, owner
        self._stack = NestedExits()
        self._session: SandboxSession | None = None
        self._project, self._run = project, run
        self._on_record: RecordSink | None = None
        self._turn = 0
        # The session's source_state when a version was last recorded: with nothing that could
        # change the project's files handled since then (a build aside), there is nothing new to
        # record (the tar out of the sandbox costs ~0.1 s at the end of every run).
        self._recorded_state: int | None = None
        self._early: _EarlyAcquire | None = None
        self._warmed: _Warmed | None = None  # the last warm-up (and render check) started
        self._render = RenderAhead(manager, RenderCheckSettings.from_env())
        self.sandbox_id: str | None = None
        self.dev_url: str | None = None

    @property
    def template(self) -> str:
        """The template the sandbox has or will have."""
        return self._template.name

    def prefer_template(self, name: str) -> None:
        """Take the model's ``framework:``/``base`` unless chosen explicitly or already started."""
        if not self._explicit and self._session is None and name in TEMPLATES:
            self._template = get_template(name)

    def acquire_early(self, tasks: TaskGroup, on_record: RecordSink | None = None) -> None:
        """Acquire the sandbox for the current template in ``tasks`` (see the module docstring);
        recorded at once, so a :meth:`close` right after still releases what it gets; with
        ``on_record`` the sandbox is made ready (:meth:`_make_ready`) as soon as it is there."""
        if self._early is not None or self._session is not None:
            return
        self._early = _EarlyAcquire(self._template.name)
        tasks.start_soon(self._acquire_early, self._early, on_record)

    async def _acquire_early(self, early: _EarlyAcquire, on_record: RecordSink | None) -> None:
        try:
            early.sandbox = await self._manager.acquire(self._chat, self._owner, early.template)
            if on_record is not None:
                with early.restoring:  # cancelled by a close before the first event
                    await self._make_ready(early.sandbox, on_record)
                    early.ready = True
        except SandboxError:
            pass  # target() acquires again and reports the failure where it matters
        finally:
            early.done.set()

    async def _make_ready(self, sandbox: Sandbox, on_record: RecordSink) -> None:
        """Tell the client the sandbox (at once, not only at the end: it can show the live
        preview meanwhile) and give a new one the chat's latest version."""
        await on_record("sandbox_ready", {"sandbox_id": sandbox.id})
        if self._project is not None:
            await self._project.restore_if_stale(sandbox.id, on_record)

    async def _take_early(self) -> _EarlyAcquire | None:
        """The early acquire if it got a sandbox of the template wanted now; a wrong one is
        released."""
        early, self._early = self._early, None
        if early is None:
            return None
        await early.done.wait()
        if early.sandbox is None:
            return None
        if early.template != self._template.name:
            await self._manager.release(early.sandbox.id)
            return None
        return early

    async def target(self, on_record: RecordSink) -> EventTarget:
        """Acquire the chat's sandbox and open a session on it (once)."""
        if self._session is not None:
            return self._session
        early = await self._take_early()
        if early is not None and early.sandbox is not None:
            sandbox = early.sandbox
        else:
            sandbox = await self._manager.acquire(self._chat, self._owner, self._template.name)
        self.sandbox_id = sandbox.id
        self._on_record = on_record
        if early is None or not early.ready:  # a new sandbox gets the project before any event
            await self._make_ready(sandbox, on_record)
        session = manager_session(
            self._manager,
            sandbox.id,
            self._template,
            on_record=on_record,
            build_ahead=True,  # post-generation builds every run: start it once the files are in
        )
        self._session = await self._stack.enter_async_context(session)
        known = self._project.in_step_files(sandbox.id) if self._project is not None else None
        if known is not None:  # no exec into the sandbox for an edit's base, the build's manifest
            self._session.start_from(known)
        # Unwound in reverse: the browser's start ends (task group) before it is discarded.
        self._stack.push_async_callback(self._render.discard_browser)
        self._render.tasks = await self._stack.enter_async_context(anyio.create_task_group())
        self._render.start_browser(sandbox)
        return self._session

    async def close(self, *, abandon: bool = False) -> SessionLog | None:
        """Finish the session, wait for the dev server, release the sandbox for reuse.

        ``abandon`` (a cancelled run) stops background installs and only flushes the files.
        """
        if self._session is None or self.sandbox_id is None:
            if self._early is not None:
                self._early.restoring.cancel()  # nobody waits for it now
            with anyio.CancelScope(shield=True):  # an early sandbox nobody used goes back
                early = await self._take_early()
                if early is not None and early.sandbox is not None:
                    await self._manager.release(early.sandbox.id)
            return None
        log = self._session.log
        self._render.stop()  # a check nobody took (the build failed): of no use now
        try:
            with anyio.move_on_after(CLOSE_LIMIT_SECONDS):
                log = await (self._session.abandon() if abandon else self._session.finish())
        finally:
            await self._stack.aclose()
            # A failed run (or one whose worker is shutting down) still records what it wrote;
            # a cancelled one only what it kept (all rolled back: nothing of the answer is left).
            if log.source_state != self._recorded_state and (not abandon or _kept_any(log)):
                with anyio.CancelScope(shield=True):
                    await self._record(self._turn, "cancelled" if abandon else "run ended")
        try:
            sandbox = await self._manager.wait_ready(self.sandbox_id)
            self.dev_url = f"{sandbox.dev_url}/"
        except SandboxError as exc:
            log.errors.append({"code": "dev_server_not_ready", "message": str(exc)})
        await self._manager.release(self.sandbox_id)
        return log

    async def warm_preview(self, check_follows: bool = False) -> None:
        """See :meth:`Workspace.warm_preview` (nothing without a sandbox)."""
        if self._session is None or self.sandbox_id is None:
            return
        try:
            await self._session.settle()
        except SandboxError:
            return  # the preview and the render check say what is wrong with it
        await self._warm(self._session, self.sandbox_id, check_follows)

    def files_ended(self, check_follows: bool) -> None:
        """See :meth:`Workspace.files_ended` (nothing before the session is open)."""
        session, sandbox_id, tasks = self._session, self.sandbox_id, self._render.tasks
        if session is not None and sandbox_id is not None and tasks is not None:
            tasks.start_soon(self._warm_ahead, session, sandbox_id, check_follows)

    async def _warm_ahead(self, session: SandboxSession, sandbox_id: str, check: bool) -> None:
        try:
            await session.quiet()
        except SandboxError:
            return
        await self._warm(session, sandbox_id, check)

    async def _warm(self, session: SandboxSession, sandbox_id: str, check: bool) -> None:
        """Warm the dev server up for the files as they are now, then start the render check
        when ``check``; the same files warmed (and checked when need be) already wait for it."""
        state, last = session.log.source_state, self._warmed
        if last is not None and last.source_state == state and (last.checked or not check):
            await last.done.wait()
            return
        warmed = self._warmed = _Warmed(state, check)
        try:
            await warm_preview_of(self._manager, sandbox_id)
            if check:
                self._render.start_check(session, sandbox_id, state)
        finally:
            warmed.done.set()

    async def check_render(self) -> RenderReport | None:
        """The render check of the sandbox's dev server (:mod:`sandbox.preview.render_check`),
        once the dev server answers; a dev server that does not is said as a skipped check.
        A check started ahead on the same files (:meth:`warm_preview`) gives its report."""
        if self._session is None or self.sandbox_id is None:
            return None
        if not self._render.settings.enabled:
            return RenderReport.skip(
                RENDER_SKIP_DISABLED, "the render check is off (KILN_RENDER_CHECK=0)"
            )
        return await self._render.check(self._session, self.sandbox_id)

    async def record_version(self, turn: int, note: str = "") -> None:
        """Once the project's files are final (a build may still run: it changes none of
        them), record them as a version unless nothing could have changed them since the last."""
        self._turn = max(self._turn, turn)
        if self._session is None or self._project is None:
            return
        await self._session.settle()
        if self._session.log.source_state != self._recorded_state:
            await self._record(turn, note)

    async def existing_project(self) -> ExistingProject | None:
        """The latest version's files, with the template of the chat's sandbox (or the one
        its files point to when the sandbox is gone) and the files the last versions changed."""
        if self._project is None or self._session is not None:
            return None
        latest = await self._project.latest()
        if latest is None:
            return None
        store, chat = self._project.store, self._project.chat
        stored = await anyio.to_thread.run_sync(store.files, chat, latest.number)
        versions = await anyio.to_thread.run_sync(store.versions, chat)
        recent = [c.path for v in reversed(versions[-RECENT_VERSIONS:]) for c in v.changes]
        if not self._explicit:
            name = await self._sandbox_template() or guess_template(stored, self.template)
            self._template = get_template(name)
        template_files = read_template_workspace(self.template)
        return existing_project(stored, self.template, template_files, recent)

    async def _sandbox_template(self) -> str | None:
        """The template of the chat's sandbox, if it has one (acquiring another would replace
        it)."""
        try:
            sandbox_id = await self._manager.registry.chat_sandbox(self._chat)
            record = await self._manager.registry.get(sandbox_id) if sandbox_id else None
        except SandboxError:
            return None
        return record.template if record is not None and record.template in TEMPLATES else None

    async def _record(self, turn: int, note: str) -> None:
        if self._project is None or self.sandbox_id is None or self._on_record is None:
            return
        info = VersionInfo(run=self._run, turn=turn, note=note)
        session = self._session
        state = session.log.source_state if session is not None else None
        # What the session wrote, when that is all that changed: no read of the workspace.
        written = await session.written_files() if session is not None else None
        await self._project.record(self.sandbox_id, info, self._on_record, written=written)
        self._recorded_state = state


def _kept_any(log: SessionLog) -> bool:
    """Whether a cancelled session kept any file it wrote (not all of them rolled back)."""
    return any(path not in log.rolled_back for path in log.files)
