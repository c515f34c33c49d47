"""What the project store raises, below :class:`~app.errors.KilnError`.

The versions API maps them: ``version_not_found`` 404, ``project_too_large`` 413,
``project_error`` 503 (git failed: a server-side trouble, detail in the log). The app
environment's API answers ``app_env_refused`` with 422 and the field at fault.
"""

from __future__ import annotations

from app.errors import KilnError


class ProjectError(KilnError):
    """A chat's project (its versioned source files) cannot be read or written."""

    code = "project_error"


class ProjectTooLarge(ProjectError):
    """A version's files are over the size cap; the message names the largest files."""

    code = "project_too_large"


class VersionNotFound(ProjectError):
    """No such version of the chat's project."""

    code = "version_not_found"


class RemoteError(ProjectError):
    """A push to, or an import from, a git remote failed (:mod:`app.projects.git_remote`)."""

    code = "remote_failed"


class RemoteUrlRefused(RemoteError):
    """A URL or branch kiln does not reach (``file://``, ``ext::``, a local path, a URL with
    a credential in it, a malformed branch)."""

    code = "remote_url_refused"


class RemoteAuthFailed(RemoteError):
    """The remote refused the credentials (401/403)."""

    code = "remote_auth_failed"


class RemoteNotFound(RemoteError):
    """The remote has no such repository or branch."""

    code = "remote_not_found"


class RemoteNotFastForward(RemoteError):
    """The remote branch moved on: kiln never forces, so the push is refused."""

    code = "remote_not_fast_forward"


class RemoteUnreachable(RemoteError):
    """The remote cannot be reached (name, connection, TLS, a redirect not followed) or did
    not answer within the time limit."""

    code = "remote_unreachable"


class ImportRefused(RemoteError):
    """A repository kiln will not import: over the size or file limits, nothing to run."""

    code = "import_refused"


class AppEnvRefused(ProjectError):
    """A variable of the app's environment kiln will not keep (:mod:`app.projects.app_env`);
    ``field`` names what was wrong (``name``, ``value``, ``secret``), the message says why and
    never quotes a value."""

    code = "app_env_refused"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
