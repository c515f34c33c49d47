"""The sandbox layer's exceptions. Docker and Redis errors are wrapped here, at the boundary::

    SandboxError                    base; ``sandbox`` never imports ``app``, so this is its own root
    ├── SandboxNotFound             a sandbox, container, volume or network that does not exist
    ├── SandboxUnavailable          Docker or Redis unreachable, an image missing, a container
    │   │                           that stopped: trying again later may work (a 503, not a 404)
    │   ├── SandboxCapacity         the host holds as many sandboxes as it may (or Docker has
    │   │                           no address pool left)
    │   ├── DockerUnavailable       the Docker engine does not answer
    │   ├── RedisUnavailable        Redis does not answer (or failed)
    │   ├── ImageMissing            a template's image is not built
    │   └── DiskFull                Docker ran out of disk space
    ├── ImageBuildFailed            building a base or template image failed
    ├── CommandRefused              a command outside the allow-list or with an unsafe argument
    ├── InstallRefused              a package spec that does not validate
    ├── WriteFailed                 a file could not be written into the workspace
    ├── DiskQuotaExceeded           the sandbox's own disk quota is used up
    ├── FileTooLarge                a workspace file over the read limit
    ├── SandboxConfigError          a sandbox setting is missing or malformed
    └── InstanceClaimed             ``KILN_INSTANCE`` belongs to another data directory

Messages name the offending value (``{value!r}``). Each class carries the stable ``code`` a user
sees (the same mechanism as ``app.errors``); ``app.errors`` draws the whole tree.
"""

from __future__ import annotations


class SandboxError(Exception):
    """Base of the sandbox layer's exceptions."""

    code = "sandbox_error"


class SandboxNotFound(SandboxError):
    """A sandbox (or one of its Docker objects) that does not exist."""

    code = "sandbox_not_found"


class SandboxUnavailable(SandboxError):
    """Docker or Redis cannot be reached, or the sandbox cannot run right now."""

    code = "sandbox_unavailable"


class SandboxCapacity(SandboxUnavailable):
    """The host cannot take another sandbox: the configured maximum, or Docker's address pools."""

    code = "sandbox_capacity"


class DockerUnavailable(SandboxUnavailable):
    """The Docker engine cannot be reached."""

    code = "docker_unavailable"


class RedisUnavailable(SandboxUnavailable):
    """Redis cannot be reached (or a Redis call failed)."""

    code = "redis_unavailable"


class ImageMissing(SandboxUnavailable):
    """A template's image is not built on this host."""

    code = "image_missing"


class DiskFull(SandboxUnavailable):
    """Docker has no disk space left for a sandbox's container, volume or layer."""

    code = "disk_full"


class ImageBuildFailed(SandboxError):
    """An image could not be built."""

    code = "image_build_failed"


class CommandRefused(SandboxError):
    """A command the policy does not allow; the message says why."""

    code = "command_refused"


class InstallRefused(SandboxError):
    """A package spec that the install queue will not pass to npm."""

    code = "install_refused"


class WriteFailed(SandboxError):
    """Files could not be written into a sandbox's workspace."""

    code = "write_failed"


class DiskQuotaExceeded(SandboxError):
    """The sandbox has written all its disk quota allows (``KILN_SANDBOX_DISK_QUOTA``):
    nothing to retry, files must go first."""

    code = "disk_quota_exceeded"


class FileTooLarge(SandboxError):
    """A workspace file larger than what is read back; the message names path and size."""

    code = "file_too_large"


class SandboxConfigError(SandboxError, ValueError):
    """A sandbox setting is missing or malformed; the message names the variable and value.

    Also a ``ValueError``: the CLI's handlers of a bad setting catch that (exit code 2)."""

    code = "config_error"


class InstanceClaimed(SandboxError):
    """The instance is claimed by another data directory (two servers on one instance would
    reap each other's sandboxes); the message names both folders and the way out."""

    code = "instance_claimed"
