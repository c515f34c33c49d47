"""The settings of the ``openai-compatible`` provider, read from the environment.

- ``KILN_OPENAI_COMPATIBLE_BASE_URL``: the server's OpenAI API root, ``/v1`` included
  (``http://localhost:11434/v1`` for Ollama, ``http://localhost:8000/v1`` for vLLM,
  ``http://localhost:1234/v1`` for LM Studio, ``https://openrouter.ai/api/v1``). Required to use
  the provider; ``http`` or ``https`` only.
- ``KILN_OPENAI_COMPATIBLE_API_KEY``: optional (local servers need none); a key a user stored
  for ``openai-compatible`` (``PUT /api/me/keys/openai-compatible``) is used first.
- ``KILN_OPENAI_COMPATIBLE_MODEL``: the model when none is asked for (``llama3.1:8b``).
- ``KILN_OPENAI_COMPATIBLE_CONTEXT_WINDOW`` (32768) and
  ``KILN_OPENAI_COMPATIBLE_MAX_OUTPUT_TOKENS`` (4096): the model's window and the output cap of
  each request. kiln cannot ask an arbitrary server for them, so they are settings; they apply to
  every model of this provider.
- ``KILN_OPENAI_COMPATIBLE_IMAGES`` (false): whether the server's models read images (llava,
  qwen2.5-vl, most of OpenRouter's). Off, a message with images for this provider is refused in
  words (``images_unsupported``): many local models would drop them without a word.

Nothing here imports the SDK: resolving a provider is cheap and makes no network call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from app.errors import ConfigError, ModelRefused
from app.providers.models import ModelLimits, validate_open_model
from sandbox import EnvReader

BASE_URL_VAR = "KILN_OPENAI_COMPATIBLE_BASE_URL"
API_KEY_VAR = "KILN_OPENAI_COMPATIBLE_API_KEY"
MODEL_VAR = "KILN_OPENAI_COMPATIBLE_MODEL"
CONTEXT_WINDOW_VAR = "KILN_OPENAI_COMPATIBLE_CONTEXT_WINDOW"
MAX_OUTPUT_VAR = "KILN_OPENAI_COMPATIBLE_MAX_OUTPUT_TOKENS"
IMAGES_VAR = "KILN_OPENAI_COMPATIBLE_IMAGES"
DEFAULT_MODEL = "llama3.1:8b"
DEFAULT_CONTEXT_WINDOW = 32_768
DEFAULT_MAX_OUTPUT_TOKENS = 4_096
MAX_TOKENS_SETTING = 10_000_000  # far above any model's window; catches a typo's extra zeros


@dataclass(frozen=True)
class CompatibleSettings:
    """Where the OpenAI-compatible server is and what its models can take."""

    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    model: str = DEFAULT_MODEL
    context_window: int = DEFAULT_CONTEXT_WINDOW
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    images: bool = False

    @property
    def limits(self) -> ModelLimits:
        """The window and output cap every model of this provider gets."""
        return ModelLimits(self.context_window, self.max_output_tokens)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> CompatibleSettings:
        """The settings in ``env`` (table in the module docstring); bad values raise
        :class:`~app.errors.ConfigError` naming the variable and the value."""
        read = EnvReader(env, ConfigError)
        raw_url = read.raw(BASE_URL_VAR)
        model = read.text(MODEL_VAR, DEFAULT_MODEL)
        try:
            validate_open_model(model)
        except ModelRefused as exc:  # a bad setting is the operator's error, not the model's
            raise ConfigError(f"{MODEL_VAR}: {exc}") from exc
        window = read.integer(
            CONTEXT_WINDOW_VAR, cls.context_window, low=1, high=MAX_TOKENS_SETTING
        )
        cap = read.integer(MAX_OUTPUT_VAR, cls.max_output_tokens, low=1, high=MAX_TOKENS_SETTING)
        if cap >= window:
            raise ConfigError(
                f"{MAX_OUTPUT_VAR}={cap!r} must be smaller than {CONTEXT_WINDOW_VAR}={window!r}: "
                "the output cap is part of the window"
            )
        return cls(
            base_url=check_base_url(raw_url.strip()) if raw_url else None,
            api_key=read.raw(API_KEY_VAR),
            model=model,
            context_window=window,
            max_output_tokens=cap,
            images=read.boolean(IMAGES_VAR, cls.images),
        )

    def require_base_url(self) -> str:
        """The base URL; :class:`~app.errors.ConfigError` in words when it is not set."""
        if self.base_url is None:
            raise ConfigError(
                f"the openai-compatible provider needs {BASE_URL_VAR} "
                "(the server's API root, e.g. 'http://localhost:11434/v1')"
            )
        return self.base_url


def check_base_url(url: str) -> str:
    """``url`` without a trailing ``/`` if it is an ``http(s)`` URL with a host; else a
    :class:`~app.errors.ConfigError` naming it."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{BASE_URL_VAR}={url!r} must be an http:// or https:// URL with a host")
    if parts.query or parts.fragment:
        raise ConfigError(f"{BASE_URL_VAR}={url!r} must not have a query or a fragment")
    return url.rstrip("/")
