"""LLM providers behind one interface (:mod:`app.providers.base`), and how kiln picks one.

- :func:`get_provider` builds a provider by name: ``anthropic``, ``openai``, ``google`` (each
  through its official async SDK) or ``replay`` (recorded answers, no key needed). The key is the
  one passed (a user's stored key) or the environment's (``ANTHROPIC_API_KEY``,
  ``OPENAI_API_KEY``, ``GEMINI_API_KEY``); the base URL the one passed or
  ``KILN_ANTHROPIC_BASE_URL`` / ``KILN_OPENAI_BASE_URL`` / ``KILN_GOOGLE_BASE_URL`` (gateways,
  proxies, test servers); replay reads recordings from ``KILN_RECORDINGS_DIR`` and the built-in
  demos. SDKs are imported only when their provider is built (each costs up to a second).
- :func:`resolve_provider` turns what a user asked for (provider and/or model, both optional)
  into a :class:`ProviderChoice`, without any network call:

  1. an explicit ``replay``, or nothing asked and no key configured: ``replay`` (default demo
     ``todo-app``);
  2. an explicit provider: it needs a key (:class:`~app.errors.ConfigError` otherwise) and the
     model, default or given, must be one it serves (:class:`~app.errors.ModelRefused`);
  3. only a model: the provider that serves it, which needs a key (a Gemini model with only an
     OpenAI key is :class:`~app.errors.ModelRefused`); a name no provider serves is taken as a
     recording name for ``replay``;
  4. nothing asked: the first provider with a key, in the order anthropic, openai, google.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from app.errors import ConfigError, ModelRefused
from app.providers.base import (
    FinishReason,
    Message,
    Provider,
    ProviderRequest,
    ProviderStream,
    StreamOutcome,
    Usage,
)
from app.providers.models import DEFAULT_MODELS, PROVIDERS, provider_of, validate_model

__all__ = [
    "API_KEY_VARS",
    "BASE_URL_VARS",
    "PROVIDER_NAMES",
    "FinishReason",
    "Message",
    "Provider",
    "ProviderChoice",
    "ProviderRequest",
    "ProviderStream",
    "StreamOutcome",
    "Usage",
    "get_provider",
    "resolve_provider",
]

PROVIDER_NAMES = (*PROVIDERS, "replay")
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
    if name not in API_KEY_VARS:
        raise ConfigError(f"unknown provider {name!r}; known: {', '.join(PROVIDER_NAMES)}")
    key = api_key or env.get(API_KEY_VARS[name])
    if not key:
        raise ConfigError(f"no API key for {name!r}: set {API_KEY_VARS[name]} or store a key")
    url = base_url or env.get(BASE_URL_VARS[name]) or None
    return _build_sdk_provider(name, key, url)


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
            return _replay_choice(model)
        provider = _keyed_provider_of(model, served_by, keys)
    return ProviderChoice(provider, model, keys[provider], env.get(BASE_URL_VARS[provider]) or None)


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


def _replay_choice(model: str | None) -> ProviderChoice:
    from app.providers.replay import check_recording_name

    name = model or DEFAULT_RECORDING
    check_recording_name(name)
    return ProviderChoice("replay", name)
