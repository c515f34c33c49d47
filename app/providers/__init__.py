"""LLM providers behind one interface (:mod:`app.providers.base`), and how kiln picks one.

- :func:`get_provider` builds a provider by name: ``anthropic``, ``openai``, ``google`` (each
  through its official async SDK), ``openai-compatible`` (the ``openai`` SDK against any server
  speaking Chat Completions: Ollama, vLLM, LM Studio, OpenRouter, gateways) or ``replay``
  (recorded answers, no key needed). The key is the one passed (a user's stored key) or the
  environment's (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``, ``GEMINI_API_KEY``, and the optional
  ``KILN_OPENAI_COMPATIBLE_API_KEY``); the base URL the one passed or
  ``KILN_ANTHROPIC_BASE_URL`` / ``KILN_OPENAI_BASE_URL`` / ``KILN_GOOGLE_BASE_URL`` (gateways,
  proxies, test servers) / ``KILN_OPENAI_COMPATIBLE_BASE_URL`` (required for that provider;
  its settings: :mod:`app.providers.compatible_settings`); replay reads recordings from
  ``KILN_RECORDINGS_DIR`` and the built-in demos. SDKs are imported only when their provider is
  built (each costs up to a second).
- :func:`resolve_provider` turns what a user asked for (provider and/or model, both optional)
  into a :class:`ProviderChoice`, without any network call. A provider is *configured* when it
  has a key (``openai-compatible``: when its base URL is set; a key is optional):

  1. an explicit ``replay``, or nothing asked and no provider configured: ``replay`` (default
     demo ``todo-app``);
  2. an explicit provider: it must be configured (:class:`~app.errors.ConfigError` otherwise)
     and the model, default or given, must be one it serves (:class:`~app.errors.ModelRefused`;
     ``openai-compatible`` takes any well-formed name, default ``KILN_OPENAI_COMPATIBLE_MODEL``);
  3. only a model: the provider that serves it, which needs a key (a Gemini model with only an
     OpenAI key is :class:`~app.errors.ModelRefused`); a name no provider serves is taken as a
     recording name for ``replay`` (an ``openai-compatible`` model is never guessed from its
     name: name the provider);
  4. nothing asked: the first configured provider, in the order anthropic, openai, google,
     openai-compatible.
- :func:`refuse_unread_images` refuses images for a model that cannot read them (the model
  table's ``images``, ``KILN_OPENAI_COMPATIBLE_IMAGES`` for ``openai-compatible``; ``replay``
  takes them and its runs say they were ignored).
- :func:`model_limits` is the context window and output cap a run uses for a provider's model
  (the table in :mod:`app.providers.models`, the settings for ``openai-compatible``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from app.errors import ConfigError, ImagesUnsupported, ModelRefused
from app.providers.base import (
    FinishReason,
    Message,
    Provider,
    ProviderRequest,
    ProviderStream,
    StreamOutcome,
    Usage,
)
from app.providers.compatible_settings import BASE_URL_VAR as COMPATIBLE_BASE_URL_VAR
from app.providers.compatible_settings import CompatibleSettings
from app.providers.models import (
    DEFAULT_MAX_OUTPUT_TOKENS,
    DEFAULT_MODELS,
    OPENAI_COMPATIBLE,
    PROVIDERS,
    ModelLimits,
    provider_of,
    validate_model,
    validate_open_model,
)

__all__ = [
    "API_KEY_VARS",
    "BASE_URL_VARS",
    "OPENAI_COMPATIBLE",
    "PROVIDER_NAMES",
    "FinishReason",
    "Message",
    "ModelLimits",
    "Provider",
    "ProviderChoice",
    "ProviderRequest",
    "ProviderStream",
    "StreamOutcome",
    "Usage",
    "configured_providers",
    "get_provider",
    "model_limits",
    "refuse_unread_images",
    "resolve_provider",
]

PROVIDER_NAMES = (*PROVIDERS, OPENAI_COMPATIBLE, "replay")
API_KEY_VARS: dict[str, str] = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "google": "GEMINI_API_KEY",
}
BASE_URL_VARS: dict[str, str] = {
    "anthropic": "KILN_ANTHROPIC_BASE_URL",
    "openai": "KILN_OPENAI_BASE_URL",
    "google": "KILN_GOOGLE_BASE_URL",
}
RECORDINGS_DIR_VAR = "KILN_RECORDINGS_DIR"
DEFAULT_RECORDING = "todo-app"
REPLAY_LIMITS = ModelLimits(200_000)  # recordings are not a model; any roomy window will do


@dataclass(frozen=True)
class ProviderChoice:
    """A resolved provider, model, key and base URL; :meth:`build` makes the provider."""

    provider: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None

    def build(self, env: Mapping[str, str] | None = None) -> Provider:
        """The provider this choice names."""
        return get_provider(self.provider, self.api_key, self.base_url, env=env)


def get_provider(
    name: str,
    api_key: str | None = None,
    base_url: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
) -> Provider:
    """Build provider ``name``; key and base URL default to the environment's."""
    env = os.environ if env is None else env
    if name == "replay":
        from app.providers.replay import ReplayProvider

        folder = env.get(RECORDINGS_DIR_VAR)
        return ReplayProvider(Path(folder) if folder else None)
    if name == OPENAI_COMPATIBLE:
        return _build_compatible(api_key, base_url, env)
    if name not in API_KEY_VARS:
        raise ConfigError(f"unknown provider {name!r}; known: {', '.join(PROVIDER_NAMES)}")
    key = api_key or env.get(API_KEY_VARS[name])
    if not key:
        raise ConfigError(f"no API key for {name!r}: set {API_KEY_VARS[name]} or store a key")
    url = base_url or env.get(BASE_URL_VARS[name]) or None
    return _build_sdk_provider(name, key, url)


def _build_compatible(
    api_key: str | None, base_url: str | None, env: Mapping[str, str]
) -> Provider:
    from app.providers.openai_compatible import OpenAICompatibleProvider

    settings = CompatibleSettings.from_env(env)
    url = base_url or settings.require_base_url()
    return OpenAICompatibleProvider(url, api_key or settings.api_key)


def _build_sdk_provider(name: str, key: str, url: str | None) -> Provider:
    if name == "anthropic":
        from app.providers.anthropic_provider import AnthropicProvider

        return AnthropicProvider(key, url)
    if name == "openai":
        from app.providers.openai_provider import OpenAIProvider

        return OpenAIProvider(key, url)
    from app.providers.google_provider import GoogleProvider

    return GoogleProvider(key, url)


def resolve_provider(
    requested_provider: str | None,
    model: str | None,
    env: Mapping[str, str],
    api_keys: Mapping[str, str] | None = None,
) -> ProviderChoice:
    """Pick provider and model for a request (rules in the module docstring); no network."""
    keys = _configured_keys(env, api_keys or {})
    if requested_provider == OPENAI_COMPATIBLE or (
        requested_provider is None and model is None and not keys and _compatible_is_set(env)
    ):
        return _compatible_choice(model, env, api_keys or {})
    if requested_provider == "replay" or (
        requested_provider is None and model is None and not keys
    ):
        return _replay_choice(model)
    if requested_provider is not None:
        provider = _known_provider(requested_provider, keys)
        model = model or DEFAULT_MODELS[provider]
        validate_model(provider, model)
    elif model is None:
        provider = next(name for name in PROVIDERS if name in keys)
        model = DEFAULT_MODELS[provider]
    else:
        served_by = provider_of(model)
        if served_by is None:
            return _recording_or_hint(model, env)
        provider = _keyed_provider_of(model, served_by, keys)
    return ProviderChoice(provider, model, keys[provider], env.get(BASE_URL_VARS[provider]) or None)


def configured_providers(env: Mapping[str, str], api_keys: Mapping[str, str]) -> list[str]:
    """The providers an explicit request may name now (rule 2): those with a key, then
    ``openai-compatible`` when its base URL is set, then ``replay`` (always)."""
    names = list(_configured_keys(env, api_keys))
    if _compatible_is_set(env):
        names.append(OPENAI_COMPATIBLE)
    return [*names, "replay"]


def model_limits(provider: str, model: str, env: Mapping[str, str]) -> ModelLimits:
    """The context window and output cap of ``provider``'s ``model``: the model table's (the
    cap never above :data:`~app.providers.models.DEFAULT_MAX_OUTPUT_TOKENS`), the settings for
    ``openai-compatible``, a roomy window for ``replay``. A model the provider does not serve is
    :class:`~app.errors.ModelRefused`."""
    if provider == "replay":
        return REPLAY_LIMITS
    if provider == OPENAI_COMPATIBLE:
        validate_open_model(model)
        return CompatibleSettings.from_env(env).limits
    family = validate_model(provider, model)
    cap = min(family.max_output_tokens, DEFAULT_MAX_OUTPUT_TOKENS)
    return ModelLimits(family.context_window, cap)


def refuse_unread_images(choice: ProviderChoice, count: int, env: Mapping[str, str]) -> None:
    """Raise :class:`~app.errors.ImagesUnsupported` when ``count`` images go to a model that
    cannot read them (replay takes them: the run says they were ignored)."""
    if count == 0 or choice.provider == "replay":
        return
    if choice.provider == OPENAI_COMPATIBLE:
        if not CompatibleSettings.from_env(env).images:
            raise ImagesUnsupported(
                f"the openai-compatible server's models are not set up to read images "
                f"(KILN_OPENAI_COMPATIBLE_IMAGES); send the message without its {count} "
                "image(s), or ask the operator to turn images on for a model that reads them"
            )
        return
    if not validate_model(choice.provider, choice.model).images:
        raise ImagesUnsupported(
            f"{choice.provider} model {choice.model!r} cannot read images; send the message "
            f"without its {count} image(s), or choose a model that reads images"
        )


def _compatible_is_set(env: Mapping[str, str]) -> bool:
    """Whether the ``openai-compatible`` base URL is set (checked when the provider is used)."""
    return bool(env.get(COMPATIBLE_BASE_URL_VAR, "").strip())


def _compatible_choice(
    model: str | None, env: Mapping[str, str], api_keys: Mapping[str, str]
) -> ProviderChoice:
    """The ``openai-compatible`` choice: its base URL must be set; the key is optional."""
    settings = CompatibleSettings.from_env(env)
    url = settings.require_base_url()
    model = validate_open_model(settings.model if model is None else model)
    key = api_keys.get(OPENAI_COMPATIBLE) or settings.api_key
    return ProviderChoice(OPENAI_COMPATIBLE, model, key, url)


def _configured_keys(env: Mapping[str, str], api_keys: Mapping[str, str]) -> dict[str, str]:
    """Provider -> key, explicit keys first, then the environment's; empty values ignored."""
    keys = {name: api_keys.get(name) or env.get(var) for name, var in API_KEY_VARS.items()}
    return {name: key for name, key in keys.items() if key}


def _known_provider(requested: str, keys: Mapping[str, str]) -> str:
    if requested not in API_KEY_VARS:
        raise ConfigError(f"unknown provider {requested!r}; known: {', '.join(PROVIDER_NAMES)}")
    if requested not in keys:
        raise ConfigError(
            f"no API key for {requested!r}: set {API_KEY_VARS[requested]} or store a key"
        )
    return requested


def _keyed_provider_of(model: str, served_by: str, keys: Mapping[str, str]) -> str:
    """``served_by`` if it has a key; else the model is refused (its provider is unusable)."""
    if served_by not in keys:
        have = ", ".join(keys) or "none"
        raise ModelRefused(
            f"model {model!r} is served by {served_by!r}, and no {served_by} key is "
            f"configured ({API_KEY_VARS[served_by]}); keys configured: {have}"
        )
    return served_by


def _recording_or_hint(model: str, env: Mapping[str, str]) -> ProviderChoice:
    """``model`` as a recording name; when it cannot be one and an openai-compatible server is
    set up, the refusal says how to ask for that server's model instead."""
    try:
        return _replay_choice(model)
    except ModelRefused as exc:
        if not _compatible_is_set(env):
            raise
        raise ModelRefused(
            f"{exc}; for a model of the openai-compatible server, name the provider "
            f"'{OPENAI_COMPATIBLE}' too"
        ) from exc


def _replay_choice(model: str | None) -> ProviderChoice:
    from app.providers.replay import check_recording_name

    name = model or DEFAULT_RECORDING
    check_recording_name(name)
    return ProviderChoice("replay", name)
