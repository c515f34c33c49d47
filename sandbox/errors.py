"""The sandbox layer's exceptions. Docker and Redis errors are wrapped at the boundary
(sandbox/docker_boundary.py, sandbox/redis_boundary.py) into these.

``SandboxError`` is its own root (``sandbox`` never imports ``app``); ``SandboxUnavailable`` and
its subclasses are outages where trying again later may work (a 503, not a 404). The tree is
drawn once, with every class and its code, in app/errors.py's docstring.

Messages name the offending value (``{value!r}``). Each class carries the stable ``code`` a user
sees (the same mechanism as ``app.errors``).
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


class SandboxLost(SandboxUnavailable):
    """The sandbox's node was lost (on a cluster): its workload and workspace are gone; the
    chat's next message starts it over on another node from the project store."""

    code = "sandbox_lost"


class DockerUnavailable(SandboxUnavailable):
    """The Docker engine cannot be reached."""

    code = "docker_unavailable"


class RedisUnavailable(SandboxUnavailable):
    """Redis cannot be reached (or a Redis call failed)."""

    code = "redis_unavailable"


class RedisAuthFailed(RedisUnavailable):
    """Redis refused kiln's password (or asked for one it was not given): a setting to fix."""

    code = "redis_auth_failed"


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
