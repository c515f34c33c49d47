"""kiln's exception tree, all layers drawn in one place, and the stable codes users see::

    KilnError                         base of everything ``app`` raises (code in brackets)
    ├── ProviderError                 an LLM provider failed, after retries [provider_error]
    │   ├── AuthError                 the key was refused (401/403) [provider_auth]
    │   ├── RateLimited               429; ``retry_after`` seconds when the provider said so
    │   ├── Overloaded                529/503 "overloaded" [provider_overloaded]
    │   ├── ContextTooLong            the request does not fit the model's window
    │   ├── ProviderUnavailable       network failure, timeout, 5xx, a stream cut mid-way
    │   └── ModelRefused              a model the provider does not serve, or a key of another
    ├── BudgetExceeded                a token, turn or tool-call budget is spent
    ├── AdmissionRefused              a run limit refused a new run (which one: ``limit``)
    ├── ConfigError                   a setting is missing or malformed [config_error]
    ├── StoreError                    app.store: the database failed [store_error]
    │   └── StoreConflict             a write contradicts what is stored [conflict]
    ├── RunNotFound, RunFinished,     app.runs.errors: the runs machinery
    │   InvalidRunRequest, QueueUnavailable
    ├── StreamFormatError             app.recordings: a recording kiln cannot read
    ├── MaterializeError              app.recordings: a stream's files cannot be written out
    ├── ProjectError                  app.projects.errors: a chat's versioned project
    │   ├── ProjectTooLarge           a version over the size cap [project_too_large]
    │   └── VersionNotFound           no such version of the chat's project [version_not_found]
    └── ApiError                      app.api.errors: an HTTP error with its status

    parser.errors.ParseError          own root: ``parser`` imports nothing from kiln
    ├── UnsafePathError               [invalid_file_path]
    │   └── ProtectedPathError        [protected_path]: into node_modules/ or .kiln/
    └── InvalidPackageError           [invalid_package]
    prompts.fitting.PromptBudgetError own root (ValueError): a prompt part cannot fit its budget
    sandbox.errors.SandboxError       own root: ``sandbox`` never imports ``app``
    ├── SandboxNotFound               [sandbox_not_found]: a 404, never an outage
    ├── SandboxUnavailable            [sandbox_unavailable]: Docker or Redis down, a 503
    ├── ImageBuildFailed, CommandRefused, InstallRefused, WriteFailed, SandboxConfigError
    ├── InstanceClaimed               [instance_claimed]: the instance is another data dir's
    └── DiskQuotaExceeded             [disk_quota_exceeded]: the sandbox's own disk is full

Messages name the offending value (``{value!r}``). What a user sees is an ``error`` event with a
stable ``code``, a human message and a ``severity``. One mechanism gives the code in every tree:
the class attribute ``code``, read by :func:`error_code`.
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
