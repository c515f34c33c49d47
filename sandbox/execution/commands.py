"""Running a command in a sandbox: the policy decides, the install queue orders, docker execs.

:func:`run_command` checks the argv with :func:`sandbox.execution.command_policy.check` (a refused
one raises :class:`~sandbox.errors.CommandRefused` before anything runs). ``npm install`` and
``npm ci`` need the registry, so they go through the sandbox's install queue (kiln's npm
proxy, pinned on the argv); everything else waits until the queue is idle and runs with the
command timeout and output cap. Either way it is an argv for ``docker exec`` as the
sandbox user in ``/workspace``, never a shell.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import docker

from sandbox.execution import command_policy
from sandbox.execution.app_env import Redaction
from sandbox.execution.command_policy import CommandKind
from sandbox.execution.exec_stream import NO_SECRETS, ExecResult, OutputSink, exec_streaming
from sandbox.execution.install_queue import InstallQueue
from sandbox.settings import SandboxSettings

ContainerLookup = Callable[[], Awaitable[Any]]


async def run_command(
    client: docker.DockerClient,
    settings: SandboxSettings,
    queue: InstallQueue,
    container_for: ContainerLookup,
    argv: Sequence[str],
    on_output: OutputSink | None = None,
    redaction: Redaction = NO_SECRETS,
) -> ExecResult:
    """Run an allowed ``argv`` in the sandbox; its output goes to ``on_output`` line by line
    (an install's is redacted by the queue's runner, the sandbox's own ``redaction``)."""
    checked = command_policy.check(argv)
    if checked.kind is CommandKind.INSTALL:
        installed = await queue.run_npm(checked.argv, on_output)
        return installed.result
    return await run_after_installs(
        client, settings, queue, container_for, checked.argv, on_output, redaction
    )


async def run_after_installs(
    client: docker.DockerClient,
    settings: SandboxSettings,
    queue: InstallQueue,
    container_for: ContainerLookup,
    argv: Sequence[str],
    on_output: OutputSink | None = None,
    redaction: Redaction = NO_SECRETS,
) -> ExecResult:
    """Run ``argv`` once the install queue is idle, with the command timeout and output cap,
    the app's environment, and its secrets redacted from the output.

    No policy check: callers pass a checked argv, or kiln's own program of the template
    (:attr:`sandbox.images.templates.Template.builder`), never the model's words as they came.
    """
    await queue.wait_idle()
    container = await container_for()
    return await exec_streaming(
        client,
        container.id,
        list(argv),
        timeout=settings.command_timeout_seconds,
        output_cap=settings.output_cap_bytes,
        on_output=on_output,
        redaction=redaction,
    )
