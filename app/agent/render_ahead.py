"""A run's render checks (issue 23), with their work started ahead of need.

Chromium's start is most of a check's cost (:class:`sandbox.RenderBrowser`), so the browser starts
when the run's sandbox session opens, while the answer streams, and waits on an empty page. The
check itself loads the dev server's app, not the build's output, so it starts beside the turn's
build once the answer's files are complete (``sandbox_end``, while the stream goes on; issue 24
item 5): :meth:`RenderAhead.check` then takes its report when no source file changed since (the
session's ``source_state``), else checks again. A check nobody took (the build failed) is stopped
at the close, which starts none from then on (:meth:`RenderAhead.stop`); one voided by a newer
check had taken the browser started ahead, so another starts for the newer one.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import anyio
from anyio.abc import TaskGroup

from sandbox import (
    RENDER_IMAGE,
    RENDER_SKIP_FAILED,
    RENDER_SKIP_IMAGE,
    ImageMissing,
    RenderBrowser,
    RenderCheckSettings,
    RenderReport,
    Sandbox,
    SandboxError,
    SandboxManager,
    SandboxSession,
    run_render_check,
)


@dataclass(slots=True)
class _BrowserAhead:
    """A render browser being started while the answer streams."""

    done: anyio.Event = field(default_factory=anyio.Event)
    browser: RenderBrowser | None = None


@dataclass(slots=True)
class _CheckAhead:
    """A render check started beside a turn's build, for the files as they were then (the
    session's ``source_state``)."""

    source_state: int
    done: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    report: RenderReport | None = None
    sandbox: Sandbox | None = None  # once the check has its sandbox (and takes a browser)


class RenderAhead:
    """The render checks of one run's sandbox; background work goes to :attr:`tasks` (the
    workspace's task group, set once its session is open)."""

    def __init__(self, manager: SandboxManager, settings: RenderCheckSettings) -> None:
        """Check through ``manager``'s engine with ``settings`` (nothing starts when off)."""
        self._manager, self.settings = manager, settings
        self.tasks: TaskGroup | None = None
        self._browser: _BrowserAhead | None = None
        self._check: _CheckAhead | None = None
        self._stopped = False

    def start_browser(self, sandbox: Sandbox) -> None:
        """Start the check's browser now, in the background (nothing when the check is off)."""
        if self.settings.enabled and self.tasks is not None and self._browser is None:
            self._browser = _BrowserAhead()
            self.tasks.start_soon(self._browser_ahead, self._browser, sandbox)

    async def _browser_ahead(self, ahead: _BrowserAhead, sandbox: Sandbox) -> None:
        # Shielded: a start cancelled mid-call would leave its container running, unknown to
        # the discard at close (a stop during a run must leave nothing behind).
        with anyio.CancelScope(shield=True):
            try:
                ahead.browser = await RenderBrowser.start(
                    await self._manager.engine_beside(sandbox.container_id, RENDER_IMAGE),
                    self.settings,
                    sandbox_container=sandbox.container_id,
                    dev_port=sandbox.dev_port,
                    instance=self._manager.settings.instance,
                )
            except SandboxError:
                pass  # the check starts its own browser and says what failed there
            finally:
                ahead.done.set()

    async def _take_browser(self) -> RenderBrowser | None:
        # Taken only once started: a taker cancelled while it waits leaves the browser in its
        # slot, where the close's discard finds it.
        ahead = self._browser
        if ahead is None:
            return None
        await ahead.done.wait()
        if self._browser is not ahead:  # another taker had it first
            return None
        self._browser = None
        return ahead.browser

    async def discard_browser(self) -> None:
        """Remove a browser no check used (at the workspace's close)."""
        with anyio.CancelScope(shield=True):
            browser = await self._take_browser()
            if browser is not None:
                await browser.discard()

    def start_check(self, session: SandboxSession, sandbox_id: str, source_state: int) -> None:
        """Start checking the files at ``source_state`` (the caller had them in, settled), in
        the background (a check started before is void); none if they changed since."""
        if self.settings.enabled and self.tasks is not None and not self._stopped:
            voided = self._check
            self.void_check()
            if voided is not None and voided.sandbox is not None and not voided.done.is_set():
                self.start_browser(voided.sandbox)  # it took the browser ahead (one check each)
            if session.log.source_state == source_state:
                self._check = _CheckAhead(source_state)
                self.tasks.start_soon(self._run_check, self._check, sandbox_id)

    async def _run_check(self, ahead: _CheckAhead, sandbox_id: str) -> None:
        # Not settling again: that drops config files being written, and post-generation may
        # write some meanwhile (its fixes void this check then).
        try:
            with ahead.scope:
                ahead.report = await self._check_settled(sandbox_id, ahead)
        finally:
            ahead.done.set()

    def void_check(self) -> None:
        """Stop the check started ahead, if one runs: nobody will take it."""
        ahead, self._check = self._check, None
        if ahead is not None:
            ahead.scope.cancel()

    def stop(self) -> None:
        """The run is over: :meth:`void_check`, and start no check ahead from now on (a
        warm-up still under way would start one at the close)."""
        self._stopped = True
        self.void_check()

    async def check(self, session: SandboxSession, sandbox_id: str) -> RenderReport:
        """The check of the files there are now: the one started ahead if it checked them."""
        return await self._take_check(session) or await self.check_now(session, sandbox_id)

    async def _take_check(self, session: SandboxSession) -> RenderReport | None:
        ahead, self._check = self._check, None
        if ahead is None:
            return None
        with contextlib.suppress(SandboxError):  # the check of these files says so
            await session.settle()
        void = ahead.source_state != session.log.source_state
        if void:  # post-generation changed files since: they are checked again
            ahead.scope.cancel()
        await ahead.done.wait()  # (one browser at a time)
        return None if void else ahead.report

    async def check_now(self, session: SandboxSession, sandbox_id: str) -> RenderReport:
        """Check the render now, in the browser started ahead when there is one, once the dev
        server answers (one that does not is said as a skipped check)."""
        try:
            await session.settle()
        except SandboxError as exc:
            return RenderReport.skip(RENDER_SKIP_FAILED, f"the dev server is not ready: {exc}")
        return await self._check_settled(sandbox_id)

    async def _check_settled(
        self, sandbox_id: str, ahead: _CheckAhead | None = None
    ) -> RenderReport:
        try:
            sandbox = await self._manager.wait_ready(sandbox_id)
        except SandboxError as exc:
            return RenderReport.skip(RENDER_SKIP_FAILED, f"the dev server is not ready: {exc}")
        if ahead is not None:
            ahead.sandbox = sandbox
        browser = await self._take_browser()
        if browser is not None and browser.sandbox_container != sandbox.container_id:
            await browser.discard()  # its sandbox's container was replaced meanwhile
            browser = None
        if browser is not None:
            report = await browser.check()
        else:
            report = await self._check_in_new_browser(sandbox)
        if report.findings:  # a fix-up turn follows: its check's browser starts meanwhile
            self.start_browser(sandbox)
        return report

    async def _check_in_new_browser(self, sandbox: Sandbox) -> RenderReport:
        try:  # the sandbox's own engine: a swarm node's, the browser's image copied there
            engine = await self._manager.engine_beside(sandbox.container_id, RENDER_IMAGE)
        except ImageMissing as exc:
            return RenderReport.skip(RENDER_SKIP_IMAGE, f"the render browser is missing: {exc}")
        except SandboxError as exc:
            return RenderReport.skip(RENDER_SKIP_FAILED, f"the render check could not run: {exc}")
        return await run_render_check(
            engine,
            self.settings,
            sandbox_container=sandbox.container_id,
            dev_port=sandbox.dev_port,
            instance=self._manager.settings.instance,
        )
