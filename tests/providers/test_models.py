"""Model names: which provider serves them, their limits, and refusals."""

from __future__ import annotations

import pytest

from app.errors import ModelRefused
from app.providers.models import (
    DEFAULT_MODELS,
    MAX_OPEN_MODEL_LENGTH,
    PROVIDERS,
    find_family,
    provider_of,
    validate_model,
    validate_open_model,
)


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        pytest.param("claude-sonnet-4-6", "anthropic", id="claude-sonnet"),
        pytest.param("claude-opus-4-5-20251101", "anthropic", id="claude-dated"),
        pytest.param("claude-haiku-5-5", "anthropic", id="claude-newer-family"),
        pytest.param("gpt-4.1-mini", "openai", id="gpt-4.1"),
        pytest.param("gpt-4o-2024-08-06", "openai", id="gpt-4o-dated"),
        pytest.param("o3-mini", "openai", id="o-series"),
        pytest.param("gpt-5.5", "openai", id="gpt-5.x"),
        pytest.param("gemini-2.5-flash-lite", "google", id="gemini-2.5"),
        pytest.param("gemini-3.1-pro-preview", "google", id="gemini-newer"),
    ],
)
def test_provider_of(model: str, provider: str) -> None:
    assert provider_of(model) == provider
    assert validate_model(provider, model).provider == provider


@pytest.mark.parametrize(
    ("model", "api"),
    [
        pytest.param("gpt-4.1", "chat", id="gpt-4.1"),
        pytest.param("gpt-4o-mini", "chat", id="gpt-4o"),
        pytest.param("o4-mini", "responses", id="o-series"),
        pytest.param("gpt-5-mini", "responses", id="gpt-5"),
    ],
)
def test_openai_api_choice_is_data(model: str, api: str) -> None:
    family = find_family(model)
    assert family is not None
    assert family.api == api


@pytest.mark.parametrize(
    ("provider", "model", "served_by"),
    [
        pytest.param("openai", "gemini-2.5-flash", "'google'", id="gemini-on-openai"),
        pytest.param("anthropic", "gpt-4.1", "'openai'", id="gpt-on-anthropic"),
        pytest.param("google", "claude-sonnet-4-6", "'anthropic'", id="claude-on-google"),
    ],
)
def test_a_model_of_another_provider_is_refused(provider: str, model: str, served_by: str) -> None:
    with pytest.raises(ModelRefused, match=served_by):
        validate_model(provider, model)


@pytest.mark.parametrize(
    "model",
    [
        pytest.param("llama-3-70b", id="unknown"),
        pytest.param("gemini-2.5-flash/../../v1/files", id="path"),
        pytest.param("GPT-4.1", id="upper-case"),
        pytest.param("gemini-2.5-flash:generateContent", id="colon"),
        pytest.param("", id="empty"),
    ],
)
def test_unknown_or_malformed_names_are_refused(model: str) -> None:
    assert find_family(model) is None
    with pytest.raises(ModelRefused, match="unknown model"):
        validate_model("openai", model)


@pytest.mark.parametrize(
    ("provider", "model", "window"),
    [
        pytest.param("anthropic", "claude-sonnet-4-6", 200_000, id="claude"),
        pytest.param("openai", "gpt-4o", 128_000, id="gpt-4o"),
        pytest.param("openai", "gpt-4.1", 1_047_576, id="gpt-4.1"),
        pytest.param("openai", "gpt-5", 400_000, id="gpt-5"),
        pytest.param("google", "gemini-2.5-pro", 1_048_576, id="gemini"),
    ],
)
def test_context_windows(provider: str, model: str, window: int) -> None:
    assert validate_model(provider, model).context_window == window


def test_every_default_model_is_served_by_its_provider() -> None:
    assert set(DEFAULT_MODELS) == set(PROVIDERS)
    for provider, model in DEFAULT_MODELS.items():
        assert validate_model(provider, model).provider == provider


@pytest.mark.parametrize(
    "model",
    [
        pytest.param("llama3.1:8b", id="ollama-tag"),
        pytest.param("qwen2.5-coder:32b", id="ollama-coder"),
        pytest.param("meta-llama/Llama-3.1-8B-Instruct", id="hugging-face-path"),
        pytest.param("openrouter/anthropic/claude-3.5", id="router-path"),
        pytest.param("Mistral-7B-Instruct-v0.3-Q4_K_M.gguf", id="lm-studio-file"),
        pytest.param("m" * MAX_OPEN_MODEL_LENGTH, id="longest"),
    ],
)
def test_open_model_names_are_accepted(model: str) -> None:
    assert validate_open_model(model) == model
    assert provider_of(model) is None  # never guessed: the provider must be named


@pytest.mark.parametrize(
    ("model", "match"),
    [
        pytest.param("", "1 to 200 characters", id="empty"),
        pytest.param("m" * (MAX_OPEN_MODEL_LENGTH + 1), "1 to 200 characters", id="too-long"),
        pytest.param("llama 3", "whitespace", id="space"),
        pytest.param("llama3\n", "whitespace", id="newline"),
        pytest.param("llama\x003", "control", id="nul"),
        pytest.param("llama\x1b[31m", "control", id="escape"),
    ],
)
def test_bad_open_model_names_are_refused_by_name(model: str, match: str) -> None:
    with pytest.raises(ModelRefused, match=match) as caught:
        validate_open_model(model)
    assert repr(model)[:50] in str(caught.value)
