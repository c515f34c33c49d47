"""What runs inside the manager's sandboxes: installs, commands, reading the workspace.

:class:`SandboxManager <sandbox.lifecycle.manager.SandboxManager>` hands these on to
:class:`SandboxOperations`; each works on the sandbox's *current* container, which
``container_for`` revives if it died, so a command after a crash or a parked start just works.

- Installs go through the sandbox's :class:`~sandbox.execution.install_queue.InstallQueue`
  (one per sandbox and process, in order), with the npm proxy made sure of before each one and
  a short Docker outage ridden out (``npm install`` may run twice: it is idempotent).
- Commands are checked by the command policy (:mod:`sandbox.execution.commands`) and wait for
  the installs before them; so does a template's resident builder, kiln's own program. A
  warm-up the builder would ignore (it is warm for the same packages) is not sent
  (:mod:`sandbox.execution.builder_warmth`).
- An install's or command's failure that a full disk explains says so
  (:func:`~sandbox.execution.quota_verdict.with_quota_verdict`).
- Files are listed and read as the sandbox user (:mod:`sandbox.execution.workspace_files`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from sandbox.backends.contract import SandboxStatus
from sandbox.containers.labels import volume_name
from sandbox.docker_boundary import call
from sandbox.execution import commands, workspace_files
from sandbox.execution.app_env import AppEnvironment
from sandbox.execution.builder_warmth import BuilderWarmth
from sandbox.execution.exec_stream import ExecResult, OutputSink
from sandbox.execution.install_queue import InstallQueue, InstallResult
from sandbox.execution.quota_verdict import with_quota_verdict
from sandbox.execution.workspace_files import WorkspaceFile
from sandbox.images.templates import Template
from sandbox.lifecycle.outage import ride_out
from sandbox.lifecycle.provisioner import Provisioner

__all__ = ["ContainerFor", "SandboxOperations"]

# The manager's ``container_for``: a running container of the sandbox, revived if need be.
ContainerFor = Callable[[str], Awaitable[Any]]
# The manager's ``app_env_of``: the app environment of the sandbox's chat (to redact secrets).
AppEnvOf = Callable[[str], Awaitable[AppEnvironment]]


class SandboxOperations:
    """Installs, commands and workspace reads of one instance's sandboxes (per process)."""

    def __init__(
        self, provisioner: Provisioner, container_for: ContainerFor, app_env_of: AppEnvOf
    ) -> None:
        # The provisioner's settings, not a copy: they gain the npm proxy's address later.
        self._provisioner = provisioner
        self._container_for = container_for
        # Asked at each exec, not remembered: a secret changed during a run is redacted too.
        self._app_env_of = app_env_of
        self._queues: dict[str, InstallQueue] = {}
        self._builders = BuilderWarmth()

    def install_queue(self, sandbox_id: str) -> InstallQueue:
        """The sandbox's install queue (created on first use, per process)."""
        queue = self._queues.get(sandbox_id)
        if queue is None:
            queue = InstallQueue(
                partial(self._install_run, sandbox_id),
                lambda: ride_out(self._provisioner.ensure_network, "starting the npm proxy"),
                timeout=self._provisioner.settings.install_timeout_seconds,
            )
            self._queues[sandbox_id] = queue
        return queue

    def installing(self) -> bool:
        """Whether an install is queued or running in any sandbox of this process."""
        return not all(queue.idle for queue in self._queues.values())

    def forget(self, sandbox_id: str) -> None:
        """Drop the sandbox's install queue (the sandbox is gone)."""
        self._queues.pop(sandbox_id, None)
        self._builders.forget(sandbox_id)

    async def install(
        self, sandbox_id: str, specs: Sequence[str], on_output: OutputSink | None = None
    ) -> InstallResult:
        """Install and save packages in queue order; invalid specs raise ``InstallRefused``."""
        self._builders.forget(sandbox_id)
        return await self.install_queue(sandbox_id).install(specs, on_output)

    async def run_command(
        self, sandbox_id: str, argv: Sequence[str], on_output: OutputSink | None = None
    ) -> ExecResult:
        """Run an allowed command (``CommandRefused`` otherwise) once installs are done."""
        self._builders.forget(sandbox_id)  # `npm install x` is a command too
        result = await commands.run_command(
            self._provisioner.settings,
            self.install_queue(sandbox_id),
            partial(self.execute, sandbox_id),
            argv,
            on_output,
        )
        return await with_quota_verdict(self._provisioner.disk, volume_name(sandbox_id), result)

    async def run_builder(
        self,
        sandbox_id: str,
        template: Template,
        *,
        warm: bool,
        on_output: OutputSink | None = None,
    ) -> ExecResult:
        """Ask ``template``'s resident builder in the sandbox to build (its output and exit
        code are the build's) or to warm up, once installs are done (a warm-up of a builder
        warm already is not sent: it would do nothing)."""
        argv = template.builder_argv(warm=warm)
        if warm and await self._builder_is_warm(sandbox_id):
            return ExecResult(tuple(argv), 0, "", truncated=False, timed_out=False)
        result = await commands.run_after_installs(
            self._provisioner.settings,
            self.install_queue(sandbox_id),
            partial(self.execute, sandbox_id, builder=True),
            argv,
            on_output,
        )
        return await with_quota_verdict(self._provisioner.disk, volume_name(sandbox_id), result)

    async def list_files(self, sandbox_id: str) -> Sequence[WorkspaceFile]:
        """The workspace's regular files (dependency and build folders left out)."""
        container = await self._container_for(sandbox_id)
        return await call(workspace_files.list_workspace, container)

    async def read_file(self, sandbox_id: str, path: str) -> str | None:
        """Workspace file ``path`` as text, ``None`` if it is no regular file (or a symlink).

        Read as the sandbox user; ``FileTooLarge`` past the read limit, ``UnsafePathError``
        for a path that leaves the workspace.
        """
        container = await self._container_for(sandbox_id)
        return await call(workspace_files.read_workspace_file, container, path)

    async def _install_run(
        self, sandbox_id: str, argv: Sequence[str], timeout: float, on_output: OutputSink | None
    ) -> ExecResult:
        """Run one install argv in this sandbox's current container; again if Docker was away
        (``npm install`` may run twice: it is idempotent)."""
        cap = self._provisioner.settings.output_cap_bytes
        result = await ride_out(
            lambda: self.execute(sandbox_id, argv, timeout, cap, on_output),
            f"install in sandbox {sandbox_id!r}",
        )
        return await with_quota_verdict(self._provisioner.disk, volume_name(sandbox_id), result)

    async def _builder_is_warm(self, sandbox_id: str) -> bool:
        container = await self._container_for(sandbox_id)
        return self._builders.is_warm(sandbox_id, container.id)

    async def execute(
        self,
        sandbox_id: str,
        argv: Sequence[str],
        timeout: float,
        output_cap: int,
        on_output: OutputSink | None,
        *,
        builder: bool = False,
    ) -> ExecResult:
        """``argv`` in the sandbox's current container (revived if it died) through the
        backend's exec, streamed, within ``timeout``, the chat's secrets redacted (asked now: a
        secret changed during a run is redacted too). ``builder``: a request to the container's
        resident builder, which is warm once it is answered."""
        container = await self._container_for(sandbox_id)
        running = SandboxStatus(sandbox_id, container.id, "")
        if builder:  # noted when asked (not answered): a build's answer may come much later
            self._builders.used(sandbox_id, container.id)
        return await self._provisioner.backend.exec(
            running,
            argv,
            timeout=timeout,
            output_cap=output_cap,
            on_output=on_output,
            redaction=(await self._app_env_of(sandbox_id)).redaction,
        )
