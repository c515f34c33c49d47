"""The sandbox layer's exceptions. Docker and Redis errors are wrapped here, at the boundary::

    SandboxError                    base; ``sandbox`` never imports ``app``, so this is its own root
    ├── SandboxUnavailable          Docker or Redis unreachable, an image missing, a container gone
    ├── ImageBuildFailed            building a base or template image failed
    ├── CommandRefused              a command outside the allow-list or with an unsafe argument
    ├── InstallRefused              a package spec that does not validate
    └── WriteFailed                 a file could not be written into the workspace

Messages name the offending value (``{value!r}``). ``app.errors`` maps these onto the user-facing
``error`` events.
"""

from __future__ import annotations


class SandboxError(Exception):
    """Base of the sandbox layer's exceptions."""


class SandboxUnavailable(SandboxError):
    """Docker or Redis cannot be reached, or the sandbox's container is gone."""


class ImageBuildFailed(SandboxError):
    """An image could not be built."""


class CommandRefused(SandboxError):
    """A command the policy does not allow; the message says why."""


class InstallRefused(SandboxError):
    """A package spec that the install queue will not pass to npm."""


class WriteFailed(SandboxError):
    """Files could not be written into a sandbox's workspace."""


_CODES: tuple[tuple[type[SandboxError], str], ...] = (
    (CommandRefused, "command_refused"),
    (InstallRefused, "install_refused"),
    (WriteFailed, "write_failed"),
    (SandboxUnavailable, "sandbox_unavailable"),
)


def error_code(exc: SandboxError) -> str:
    """The stable error code a user sees for a sandbox exception."""
    return next((code for kind, code in _CODES if isinstance(exc, kind)), "sandbox_error")
