"""Model names: which provider serves them, their limits, and refusals."""

from __future__ import annotations

import pytest

from app.errors import ModelRefused
from app.providers.models import (
    DEFAULT_MODELS,
    PROVIDERS,
    context_window,
    find_family,
    provider_of,
    validate_model,
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
    with pytest.raises(ModelRefused):
        context_window(model)


@pytest.mark.parametrize(
    ("model", "window"),
    [
        pytest.param("claude-sonnet-4-6", 200_000, id="claude"),
        pytest.param("gpt-4o", 128_000, id="gpt-4o"),
        pytest.param("gpt-4.1", 1_047_576, id="gpt-4.1"),
        pytest.param("gpt-5", 400_000, id="gpt-5"),
        pytest.param("gemini-2.5-pro", 1_048_576, id="gemini"),
    ],
)
def test_context_windows(model: str, window: int) -> None:
    assert context_window(model) == window


def test_every_default_model_is_served_by_its_provider() -> None:
    assert set(DEFAULT_MODELS) == set(PROVIDERS)
    for provider, model in DEFAULT_MODELS.items():
        assert validate_model(provider, model).provider == provider
