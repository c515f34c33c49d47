"""Which provider serves which model, each model's context window and output cap, as data.

A model name is accepted only if it fully matches one family below (``re.fullmatch``, lower-case
letters, digits, ``.`` and ``-`` only), so it can never smuggle a path into a provider URL, and a
model of one provider is refused by another before any call (:class:`~app.errors.ModelRefused`).
Families are tried in order; more specific patterns come first. ``api`` only matters for OpenAI:
``"responses"`` for the reasoning families (o-series, gpt-5) that are served best, or only,
through the Responses API, ``"chat"`` for Chat Completions. ``images`` says whether the
family's models read images (issue 26): a message with images for one that does not is refused
before its run starts (``images_unsupported``), never sent with its images dropped.

The numbers are the providers' published limits for the families named; each provider also has a
catch-all family (any ``claude-*``, ``gpt-5``/``gpt-6``…, ``gemini-<version>-*``) with conservative
limits, so a newer model works before this table learns its exact numbers. A name outside every
family is refused; adding a family is a one-line change here.

The ``openai-compatible`` provider (Ollama, vLLM, LM Studio, OpenRouter, gateways) has no table:
any model name its server knows is accepted if it passes :func:`validate_open_model` (printable,
no whitespace, at most :data:`MAX_OPEN_MODEL_LENGTH` characters: ``llama3.1:8b``,
``meta-llama/Llama-3.1-8B-Instruct``), and its limits are settings
(:mod:`app.providers.compatible_settings`). The name travels in the JSON body, never in a URL.
Such a name is never matched to a provider by itself: it must be asked for with the provider.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from app.errors import ModelRefused

ProviderName = Literal["anthropic", "openai", "google"]
OpenAIApi = Literal["chat", "responses"]

PROVIDERS: tuple[ProviderName, ...] = ("anthropic", "openai", "google")
OPENAI_COMPATIBLE = "openai-compatible"
MAX_OPEN_MODEL_LENGTH = 200
# The output cap of every request unless the model or a setting says less (RunSettings' default).
DEFAULT_MAX_OUTPUT_TOKENS = 8192

# Defaults are models the SDKs in use list and do not flag as deprecated (anthropic's SDK warns
# about deprecated models); change them here.
DEFAULT_MODELS: dict[str, str] = {
    "anthropic": "claude-sonnet-4-6",
    "openai": "gpt-5.5",
    "google": "gemini-2.5-flash",
}


@dataclass(frozen=True, slots=True)
class ModelFamily:
    """Model names matching ``pattern``, served by ``provider``, with their limits."""

    provider: ProviderName
    pattern: re.Pattern[str]
    context_window: int
    max_output_tokens: int
    api: OpenAIApi = "chat"
    images: bool = True


@dataclass(frozen=True, slots=True)
class ModelLimits:
    """What a run must know of its model: the context window and the output cap per request."""

    context_window: int
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS


def _family(
    provider: ProviderName,
    pattern: str,
    window: int,
    max_output: int,
    api: OpenAIApi = "chat",
    *,
    images: bool = True,
) -> ModelFamily:
    return ModelFamily(provider, re.compile(pattern), window, max_output, api, images)


_SUFFIX = r"(-[a-z0-9][a-z0-9.-]*)?"  # dated snapshots and variants: -20250929, -latest, -mini

FAMILIES: tuple[ModelFamily, ...] = (
    _family("anthropic", r"claude-(opus|sonnet|haiku)-4" + _SUFFIX, 200_000, 32_000),
    _family("anthropic", r"claude-3-7-sonnet" + _SUFFIX, 200_000, 64_000),
    _family("anthropic", r"claude-3-5-(sonnet|haiku)" + _SUFFIX, 200_000, 8_192),
    # Any other Claude (newer families included): 200k, the window of every Claude since 3.
    _family("anthropic", r"claude-[a-z0-9][a-z0-9.-]*", 200_000, 8_192),
    _family("openai", r"gpt-[5-9](\.[0-9]+)?" + _SUFFIX, 400_000, 128_000, "responses"),
    # o1-mini and o3-mini read text only (o1, o3, o4-mini read images too).
    _family("openai", r"o[13]-mini" + _SUFFIX, 128_000, 65_536, "responses", images=False),
    _family("openai", r"o[1-9]" + _SUFFIX, 200_000, 100_000, "responses"),
    _family("openai", r"gpt-4\.1" + _SUFFIX, 1_047_576, 32_768),
    _family("openai", r"gpt-4o" + _SUFFIX, 128_000, 16_384),
    _family("openai", r"chatgpt-4o" + _SUFFIX, 128_000, 16_384),
    _family("openai", r"gpt-4-turbo" + _SUFFIX, 128_000, 4_096),
    _family("openai", r"gpt-4(-[0-9]{4})?", 8_192, 4_096, images=False),
    _family("openai", r"gpt-3\.5-turbo" + _SUFFIX, 16_385, 4_096, images=False),
    _family("google", r"gemini-2\.5-(pro|flash)" + _SUFFIX, 1_048_576, 65_536),
    # Any other Gemini (1.5, 2.0, 3.x, ...): a 1M-token window and a modest output cap.
    _family("google", r"gemini-[0-9]+(\.[0-9]+)?-[a-z0-9][a-z0-9.-]*", 1_048_576, 8_192),
)


def find_family(model: str) -> ModelFamily | None:
    """The family ``model`` belongs to, or ``None`` for a name no provider here serves."""
    for family in FAMILIES:
        if family.pattern.fullmatch(model):
            return family
    return None


def provider_of(model: str) -> ProviderName | None:
    """The provider that serves ``model``, or ``None``."""
    family = find_family(model)
    return family.provider if family else None


def validate_model(provider: str, model: str) -> ModelFamily:
    """``model``'s family if ``provider`` serves it; else raise :class:`ModelRefused`."""
    family = find_family(model)
    if family is None:
        raise ModelRefused(f"unknown model {model!r}: no provider kiln knows serves it")
    if family.provider != provider:
        raise ModelRefused(f"model {model!r} is served by {family.provider!r}, not by {provider!r}")
    return family


def validate_open_model(model: str) -> str:
    """``model`` if it is a name an OpenAI-compatible server may serve; else
    :class:`ModelRefused` naming it (empty, too long, whitespace or control characters)."""
    if not model or len(model) > MAX_OPEN_MODEL_LENGTH:
        raise ModelRefused(
            f"model name {model!r} must be 1 to {MAX_OPEN_MODEL_LENGTH} characters long"
        )
    if any(char.isspace() or not char.isprintable() for char in model):
        raise ModelRefused(f"model name {model!r} may not contain whitespace or control characters")
    return model
