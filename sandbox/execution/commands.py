"""Running a command in a sandbox: the policy decides, the install queue orders, the backend execs.

:func:`run_command` checks the argv with :func:`sandbox.execution.command_policy.check` (a refused
one raises :class:`~sandbox.errors.CommandRefused` before anything runs). ``npm install`` and
``npm ci`` need the registry, so they go through the sandbox's install queue (kiln's npm
proxy, pinned on the argv); everything else waits until the queue is idle and runs with the
command timeout and output cap. Either way it is an argv run as the sandbox user in
``/workspace`` (the backend's exec: ``docker exec`` on Docker), never a shell.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from sandbox.execution import command_policy
from sandbox.execution.command_policy import CommandKind
from sandbox.execution.exec_stream import ExecResult, OutputSink
from sandbox.execution.install_queue import InstallQueue
from sandbox.settings import SandboxSettings

# Runs an argv in the sandbox's current workload as the sandbox user, with the app's
# environment and its secrets redacted: (argv, timeout, output cap, sink). The manager's is the
# backend's exec (sandbox.lifecycle.operations).
Execute = Callable[[Sequence[str], float, int, OutputSink | None], Awaitable[ExecResult]]


async def run_command(
    settings: SandboxSettings,
    queue: InstallQueue,
    execute: Execute,
    argv: Sequence[str],
    on_output: OutputSink | None = None,
) -> ExecResult:
    """Run an allowed ``argv`` in the sandbox; its output goes to ``on_output`` line by line
    (an install's is redacted by the queue's runner, a command's by ``execute``)."""
    checked = command_policy.check(argv)
    if checked.kind is CommandKind.INSTALL:
        installed = await queue.run_npm(checked.argv, on_output)
        return installed.result
    return await run_after_installs(settings, queue, execute, checked.argv, on_output)


async def run_after_installs(
    settings: SandboxSettings,
    queue: InstallQueue,
    execute: Execute,
    argv: Sequence[str],
    on_output: OutputSink | None = None,
) -> ExecResult:
    """Run ``argv`` once the install queue is idle, with the command timeout and output cap,
    the app's environment, and its secrets redacted from the output.

    No policy check: callers pass a checked argv, or kiln's own program of the template
    (:attr:`sandbox.images.templates.Template.builder`), never the model's words as they came.
    """
    await queue.wait_idle()
    return await execute(
        list(argv), settings.command_timeout_seconds, settings.output_cap_bytes, on_output
    )
