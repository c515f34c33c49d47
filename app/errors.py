"""kiln's service-side exception tree, and how the other layers' errors fit in::

    KilnError                         base of everything ``app`` raises
    ├── ProviderError                 an LLM provider failed (after retries)
    │   ├── AuthError                 the key was refused (401/403)
    │   ├── RateLimited               429; ``retry_after`` seconds when the provider said so
    │   ├── Overloaded                529/503 "overloaded"
    │   ├── ContextTooLong            the request does not fit the model's window
    │   ├── ProviderUnavailable       network failure, timeout, 5xx, a stream cut mid-way
    │   └── ModelRefused              a model the provider does not serve, or a key of another
    ├── BudgetExceeded                a token, turn or tool-call budget is spent
    ├── AdmissionRefused              a run limit refused a new run (which one: ``limit``)
    └── ConfigError                   a setting is missing or malformed

    parser.errors.ParseError          (own root: ``parser`` imports nothing from kiln)
    sandbox.errors.SandboxError       (own root: ``sandbox`` never imports ``app``)

Messages name the offending value (``{value!r}``). What a user sees is an ``error`` event with a
stable ``code`` (each class's ``code``), a human message and a ``severity``;
:func:`error_code` maps any of the three trees onto those codes.
"""

from __future__ import annotations

from parser.errors import ParseError
from sandbox import SandboxError
from sandbox import error_code as sandbox_error_code


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
    """A run limit refused a new run; ``limit`` names which (global, user, chat, rate)."""

    code = "admission_refused"

    def __init__(self, message: str, limit: str) -> None:
        super().__init__(message)
        self.limit = limit


class ConfigError(KilnError):
    """A setting is missing or malformed."""

    code = "config_error"


def error_code(exc: BaseException) -> str:
    """The stable ``code`` a user sees for ``exc``, whichever layer raised it."""
    if isinstance(exc, KilnError):
        return exc.code
    if isinstance(exc, ParseError):
        return "parse_error"
    if isinstance(exc, SandboxError):
        return sandbox_error_code(exc)
    return "internal_error"
