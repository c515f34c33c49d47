"""The per-sandbox install queue: one npm install at a time, through kiln's npm proxy.

The queue never trusts its caller: every spec is validated again with
:func:`parser.packages.validate_package_spec` and a bad one is refused with
:class:`~sandbox.errors.InstallRefused` naming it, before anything runs. Installs run in
arrival order (anyio's lock is FIFO), each as an argv (``npm install --save -- <specs>``, no
shell) against the registry URL ``registry()`` resolves just before it (the manager makes sure
its npm proxy runs then: :mod:`sandbox.containers.npm_proxy`). The sandbox reaches nothing
else, during installs too.

Every npm argv the queue runs gets kiln's flags right after the subcommand (:func:`npm_argv`):
``--ignore-scripts`` (a package's install scripts are code from the internet, run as the
sandbox user), the registry and the user config, so a workspace ``.npmrc`` redirects nothing (npm
ranks command-line flags above every config file), and :data:`NPM_FETCH_FLAGS` (lock files'
hosts replaced by the proxy's, stalled requests cut off). Packages on :data:`SCRIPTS_ALLOWED`
that an install names get their scripts afterwards, with ``npm rebuild``.
``wait_idle`` lets commands wait until nothing is queued or running.

The queue is in-process: two processes driving the same sandbox do not see each other's
installs (one chat runs one generation at a time, so they do not).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import anyio

from parser.errors import InvalidPackageError
from parser.packages import validate_package_spec
from sandbox.containers.hardening import KILN_NPMRC
from sandbox.errors import CommandRefused, InstallRefused
from sandbox.execution import command_policy
from sandbox.execution.command_policy import CommandKind
from sandbox.execution.exec_stream import ExecResult, OutputSink
from sandbox.execution.install_stall import STALL_SECONDS, run_watched
from sandbox.execution.installed_check import (
    LS_ARGV,
    LS_TIMEOUT_SECONDS,
    already_installed,
    installed_versions,
    split_spec,
)

Runner = Callable[[Sequence[str], float, OutputSink | None], Awaitable[ExecResult]]
RegistryResolver = Callable[[], Awaitable[str]]
INSTALL_ARGV = ("npm", "install", "--save", "--no-audit", "--no-fund", "--")
# Packages whose install scripts run (by name): well known, and their scripts only fetch or check
# a native binary. Anything else is installed with --ignore-scripts only.
SCRIPTS_ALLOWED: frozenset[str] = frozenset({"esbuild"})


@dataclass(frozen=True, slots=True)
class InstallResult:
    """The packages an install asked for and how npm ended."""

    packages: tuple[str, ...]
    result: ExecResult
    already_installed: bool = False  # every package was installed already: npm did not run

    @property
    def ok(self) -> bool:
        """Whether npm exited 0 in time."""
        return self.result.ok


def validate_specs(specs: Sequence[str]) -> tuple[str, ...]:
    """The specs, stripped and de-duplicated in order; refuse the first invalid one by name."""
    if isinstance(specs, str):
        raise InstallRefused(f"install specs must be a list, got the string {specs!r}")
    if not specs:
        raise InstallRefused("no package specs given")
    packages: list[str] = []
    for spec in specs:
        try:
            package = validate_package_spec(spec)
        except (InvalidPackageError, AttributeError, TypeError):
            raise InstallRefused(
                f"refused package spec {spec!r}: not an npm package spec"
            ) from None
        if package not in packages:
            packages.append(package)
    return tuple(packages)


def install_argv(packages: Sequence[str]) -> list[str]:
    """The npm argv that installs and saves ``packages``."""
    return [*INSTALL_ARGV, *packages]


# How npm reaches the registry (kiln's npm proxy) whatever a lock file says: every ``resolved``
# URL's host is replaced by the proxy's (a lock written elsewhere, or by a kiln whose proxy sat on
# another gateway, would otherwise send npm to an address nobody answers on), and a request that
# stalls is cut off after 30 s and tried once more; an install that still makes no progress is
# stopped by the stall watch (sandbox.execution.install_stall), in words.
NPM_FETCH_FLAGS = (
    "--replace-registry-host=always",
    "--fetch-timeout=30000",
    "--fetch-retries=1",
    "--fetch-retry-mintimeout=1000",
    "--fetch-retry-maxtimeout=5000",
    "--loglevel=http",  # a line per finished request: the stall watch's heartbeat
)


def npm_argv(argv: Sequence[str], registry: str) -> list[str]:
    """``npm <subcommand> ...`` with kiln's flags inserted before any of the caller's."""
    pinned = ["--ignore-scripts", f"--registry={registry}", f"--userconfig={KILN_NPMRC}"]
    return [*argv[:2], *pinned, *NPM_FETCH_FLAGS, *argv[2:]]


def package_name(spec: str) -> str:
    """The name of a validated spec: ``zod@^3`` -> ``zod``, ``@a/b@1`` -> ``@a/b``."""
    return split_spec(spec)[0]


def rebuild_argv(packages: Sequence[str], registry: str) -> list[str] | None:
    """``npm rebuild`` of the allowed packages among ``packages`` (runs their scripts), or None."""
    allowed = sorted({package_name(spec) for spec in packages} & SCRIPTS_ALLOWED)
    if not allowed:
        return None
    argv = npm_argv(["npm", "rebuild", "--", *allowed], registry)
    argv.remove("--ignore-scripts")
    return argv


class InstallQueue:
    """Serial installs for one sandbox; ``runner`` executes, ``registry`` names the registry."""

    def __init__(
        self,
        runner: Runner,
        registry: RegistryResolver,
        *,
        timeout: float,
        stall_seconds: float = STALL_SECONDS,
    ) -> None:
        """``timeout`` bounds one npm run; ``stall_seconds`` of silence stop it earlier."""
        self._runner = runner
        self._registry = registry
        self._timeout = timeout
        self._stall_seconds = stall_seconds
        self._lock = anyio.Lock()
        self._pending = 0
        self._idle = anyio.Event()
        self._idle.set()

    @property
    def idle(self) -> bool:
        """Whether no install is queued or running."""
        return self._pending == 0

    async def wait_idle(self) -> None:
        """Return once no install is queued or running."""
        while self._pending:
            await self._idle.wait()

    async def install(
        self, specs: Sequence[str], on_output: OutputSink | None = None
    ) -> InstallResult:
        """Validate ``specs``, then install and save them once earlier installs are done;
        skipped (in words on ``on_output``) when all are installed already."""
        packages = validate_specs(specs)
        # Queued from the check to the end of the install: a command waiting for the queue to
        # be idle must not slip in between the two.
        self._enter()
        try:
            async with self._lock:
                skipped = await self._skip_if_installed(packages, on_output)
            if skipped is not None:
                return skipped
            return await self.run_npm(install_argv(packages), on_output)
        finally:
            self._leave()

    async def _skip_if_installed(
        self, packages: tuple[str, ...], on_output: OutputSink | None
    ) -> InstallResult | None:
        """An install that did not run because ``node_modules`` already has ``packages``."""
        listed = await self._runner(LS_ARGV, LS_TIMEOUT_SECONDS, None)
        versions = installed_versions(listed)
        found = already_installed(packages, versions) if versions is not None else ()
        if not found:
            return None
        words = f"already installed: {', '.join(found)} (npm install skipped)"
        if on_output is not None:
            await on_output(words)
        result = ExecResult(
            tuple(install_argv(packages)), 0, words, truncated=False, timed_out=False
        )
        return InstallResult(packages=packages, result=result, already_installed=True)

    async def run_npm(
        self, argv: Sequence[str], on_output: OutputSink | None = None
    ) -> InstallResult:
        """Run an npm install argv (``npm install|ci ...``) in queue order.

        The argv is checked against the command policy again and must be an install; it runs
        with kiln's npm flags (:func:`npm_argv`).
        """
        checked = command_policy.check(argv)
        if checked.kind is not CommandKind.INSTALL:
            raise CommandRefused(f"not an install command: {list(argv)!r}")
        self._enter()
        try:
            async with self._lock:
                registry = await self._registry()
                rebuild = rebuild_argv(checked.packages, registry)
                result = await self._run(npm_argv(checked.argv, registry), on_output, registry)
                if result.ok and rebuild is not None:
                    result = await self._run(rebuild, on_output, registry)
        finally:
            self._leave()
        return InstallResult(packages=checked.packages, result=result)

    async def _run(
        self, argv: Sequence[str], on_output: OutputSink | None, registry: str
    ) -> ExecResult:
        async def run(sink: OutputSink) -> ExecResult:
            return await self._runner(argv, self._timeout, sink)

        return await run_watched(
            run, argv, on_output, registry=registry, stall_seconds=self._stall_seconds
        )

    def _enter(self) -> None:
        if self._pending == 0:
            self._idle = anyio.Event()
        self._pending += 1

    def _leave(self) -> None:
        self._pending -= 1
        if self._pending == 0:
            self._idle.set()
