"""kiln's exception trees, every class drawn in this one place with the stable code users see::

    KilnError [internal_error]              base of everything ``app`` raises
    ├── ProviderError [provider_error]      an LLM provider failed, after retries
    │   ├── AuthError [provider_auth]       the key was refused (401/403)
    │   ├── RateLimited [provider_rate_limited]  429; ``retry_after`` seconds when said
    │   ├── Overloaded [provider_overloaded]     529/503 "overloaded"
    │   ├── ContextTooLong [context_limit_exceeded]  the request does not fit the window
    │   ├── ProviderUnavailable [provider_unavailable]  network, timeout, 5xx, a cut stream
    │   └── ModelRefused [model_refused]    a model the provider does not serve
    ├── BudgetExceeded [budget_exceeded]    a token, turn or tool-call budget is spent
    ├── AdmissionRefused [admission_refused]  a run limit refused a run (which: ``limit``)
    ├── ConfigError [config_error]          a setting is missing or malformed
    │   └── DeploymentMismatch [deployment_mismatch]  a host's setting is not its deployment's
    ├── ImageRefused [image_refused]        app/chat_images: an attached image kiln cannot take
    │   ├── ImageInvalid [image_invalid]    not an object of media_type and base64 data
    │   ├── ImageTooLarge [image_too_large]  over 5 MB once decoded
    │   ├── ImageTypeRefused [image_type_unsupported]  its bytes are no PNG, JPEG, WebP or GIF
    │   ├── ImageTypeMismatch [image_type_mismatch]  its declared type is not what its bytes are
    │   ├── TooManyImages [too_many_images]  more than 4 on one message
    │   └── ImagesUnsupported [images_unsupported]  the chosen model cannot read images
    ├── StoreError [store_error]            app.store: the database failed
    │   ├── StoreConflict [conflict]        a write contradicts what is stored
    │   └── StoreFull [disk_full]           the disk under the database is full
    ├── RunNotFound [not_found]             app.runs.errors: no such run (or not yours)
    ├── RunFinished [run_finished]          the run is over already
    ├── InvalidRunRequest [invalid_request]  a run request kiln cannot take
    ├── QueueUnavailable [queue_unavailable]  Redis, which queues runs, failed
    ├── StreamFormatError [stream_format]   app.recordings: a recording kiln cannot read
    ├── MaterializeError [materialize_failed]  app.recordings: its files cannot be written
    ├── ProjectError [project_error]        app.projects.errors: a chat's versioned project
    │   ├── ProjectTooLarge [project_too_large]  a version over the size cap
    │   ├── VersionNotFound [version_not_found]  no such version of the project
    │   ├── RemoteError [remote_failed]     app.projects.git_remote: push or import failed
    │   │   ├── RemoteUrlRefused [remote_url_refused]  file://, ext::, a path, a credential
    │   │   ├── RemoteAuthFailed [remote_auth_failed]  the remote refused the token (401/403)
    │   │   ├── RemoteNotFound [remote_not_found]  no such repository or branch
    │   │   ├── RemoteNotFastForward [remote_not_fast_forward]  the remote moved on: no force
    │   │   ├── RemoteUnreachable [remote_unreachable]  no answer (or not within the limit)
    │   │   └── ImportRefused [import_refused]  over the import's limits, or nothing to run
    │   ├── TextEditRefused [text_edit_refused]  app.projects.jsx_text: no text edit in place
    │   └── AppEnvRefused [app_env_refused]  a variable of the app kiln will not keep
    ├── PublishError [publish_failed]       app.publish.errors: a version cannot be published
    │   ├── PublishUnsupported [publish_unsupported]  a template kiln cannot serve statically
    │   ├── PublishBuildFailed [publish_build_failed]  the production build failed
    │   ├── PublishTooLarge [publish_too_large]  the build's output over the size cap
    │   ├── PublishTimeout [publish_timeout]  the build took longer than it may
    │   ├── PublishBusy [publish_in_progress]  the chat has a publish running already
    │   ├── PublishRateLimited [publish_rate_limited]  over KILN_PUBLISH_PER_HOUR; ``retry_after``
    │   ├── PublishInterrupted [publish_interrupted]  the server running the publish stopped
    │   └── NotPublished [not_published]    the chat has no live link
    └── ApiError                            app.api.errors: an HTTP status and its own code

    parser.errors.ParseError [parse_error]  own root: ``parser`` imports nothing from kiln
    ├── UnsafePathError [invalid_file_path]  a path out of the project
    │   └── ProtectedPathError [protected_path]  into node_modules/ or .kiln/
    └── InvalidPackageError [invalid_package]  a package spec that does not validate

    prompts.fitting.PromptBudgetError [prompt_budget_exceeded]  own root: a prompt part too big

    sandbox.errors.SandboxError [sandbox_error]  own root: ``sandbox`` never imports ``app``
    ├── SandboxNotFound [sandbox_not_found]  a 404, never an outage
    ├── SandboxUnavailable [sandbox_unavailable]  a 503: trying again later may work
    │   ├── SandboxCapacity [sandbox_capacity]  as many sandboxes as the host may hold
    │   ├── SandboxLost [sandbox_lost]      its cluster node was lost, workspace with it
    │   ├── DockerUnavailable [docker_unavailable]  the Docker engine does not answer
    │   ├── RedisUnavailable [redis_unavailable]  Redis does not answer (or failed)
    │   │   └── RedisAuthFailed [redis_auth_failed]  Redis refused the password (or wants one)
    │   ├── ImageMissing [image_missing]    a template's image is not built
    │   └── DiskFull [disk_full]            Docker ran out of disk space
    ├── ImageBuildFailed [image_build_failed]  building an image failed
    ├── CommandRefused [command_refused]    outside the allow-list, or an unsafe argument
    ├── InstallRefused [install_refused]    a package spec that does not validate
    ├── WriteFailed [write_failed]          a file could not be written into the workspace
    ├── DiskQuotaExceeded [disk_quota_exceeded]  the sandbox's own disk is full
    ├── FileTooLarge [file_too_large]       a workspace file over the read limit
    ├── SandboxConfigError [config_error]   a sandbox setting is missing or malformed
    ├── InstanceClaimed [instance_claimed]  the instance is another data dir's
    ├── ExecStreamBroken [exec_stream_broken]  sandbox.execution.exec_frames: a cut stream
    └── ExecReadTimeout [exec_read_timeout]  a command's output stopped coming

Docker, Redis, SQLite and Postgres exceptions become these where kiln calls them, and nowhere
else (``raise ... from exc``): sandbox/docker_boundary.py, sandbox/redis_boundary.py,
app/store/sqlite_db.py, app/store/postgres_db.py, app/providers/http_errors.py. Messages name
the offending value (``{value!r}``). What a user sees is an ``error`` event with a stable
``code``, a human message and a ``severity``. One mechanism gives the code in every tree: the
class attribute ``code``, read by :func:`error_code`; each code's words are declared in
:mod:`app.error_codes`.
tests/app/test_errors.py holds this drawing to the classes.
"""

from __future__ import annotations

from parser.errors import ParseError
from prompts.fitting import PromptBudgetError
from sandbox import SandboxError


class KilnError(Exception):
    """Base of the service's exceptions."""

    code = "internal_error"


class ProviderError(KilnError):
    """An LLM provider failed."""

    code = "provider_error"


class AuthError(ProviderError):
    """The provider refused the API key."""

    code = "provider_auth"


class RateLimited(ProviderError):
    """The provider asked us to slow down."""

    code = "provider_rate_limited"

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Overloaded(ProviderError):
    """The provider is overloaded; trying later may work."""

    code = "provider_overloaded"


class ContextTooLong(ProviderError):
    """The request does not fit the model's context window."""

    code = "context_limit_exceeded"


class ProviderUnavailable(ProviderError):
    """Network failure, timeout, a 5xx, or a stream cut before it finished."""

    code = "provider_unavailable"


class ModelRefused(ProviderError):
    """A model the provider does not serve, or one that belongs to another provider."""

    code = "model_refused"


class BudgetExceeded(KilnError):
    """A token, turn or tool-call budget is spent."""

    code = "budget_exceeded"


class AdmissionRefused(KilnError):
    """A run limit refused a new run; ``limit`` names which (global, user, chat, rate,
    sandboxes, user_sandboxes, memory); ``retry_after`` is when trying again makes sense, in
    seconds."""

    code = "admission_refused"

    def __init__(self, message: str, limit: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.limit = limit
        self.retry_after = retry_after


class ConfigError(KilnError):
    """A setting is missing or malformed."""

    code = "config_error"


class DeploymentMismatch(ConfigError):
    """A host's setting disagrees with its deployment's (app.service.deployment)."""

    code = "deployment_mismatch"


class ImageRefused(KilnError):
    """An image attached to a message that kiln refuses (before any run is queued)."""

    code = "image_refused"


class ImageInvalid(ImageRefused):
    """An ``images`` entry that is not ``{media_type, data}`` with base64 data."""

    code = "image_invalid"


class ImageTooLarge(ImageRefused):
    """An image over the size limit once decoded."""

    code = "image_too_large"


class ImageTypeRefused(ImageRefused):
    """An image whose bytes are none of the formats kiln takes (PNG, JPEG, WebP, GIF)."""

    code = "image_type_unsupported"


class ImageTypeMismatch(ImageRefused):
    """An image whose declared ``media_type`` disagrees with what its bytes are."""

    code = "image_type_mismatch"


class TooManyImages(ImageRefused):
    """More images on one message than allowed."""

    code = "too_many_images"


class ImagesUnsupported(ImageRefused):
    """Images sent to a model that cannot read them (a refusal, never a silent drop)."""

    code = "images_unsupported"


# The roots of kiln's exception trees; each of their classes carries a ``code``.
ROOTS: tuple[type[Exception], ...] = (KilnError, ParseError, SandboxError, PromptBudgetError)


def error_code(exc: BaseException) -> str:
    """The stable ``code`` a user sees for ``exc``, whichever tree it belongs to.

    Every class of kiln's trees carries ``code``; anything else (a bug) is ``internal_error``.
    """
    if isinstance(exc, ROOTS):
        return str(getattr(exc, "code", "internal_error"))
    return "internal_error"


def start_failure(exc: BaseException) -> ConfigError | SandboxError | None:
    """The setting or sandbox error a command's start failed with, also from inside the
    exception group a task group wraps it in (the first, when several); ``None`` when ``exc``
    holds anything else (a bug, whose traceback must show)."""
    if isinstance(exc, ConfigError | SandboxError):
        return exc
    if not isinstance(exc, BaseExceptionGroup):
        return None
    matched, rest = exc.split((ConfigError, SandboxError))
    if matched is None or rest is not None:
        return None
    return start_failure(matched.exceptions[0])
