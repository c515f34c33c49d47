"""Choosing and building providers (``app.providers``): keys, base URLs, replay by default."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.errors import ConfigError, ImagesUnsupported, ModelRefused
from app.providers import (
    ModelLimits,
    ProviderChoice,
    configured_providers,
    get_provider,
    model_limits,
    refuse_unread_images,
    resolve_provider,
)
from app.providers.anthropic_provider import AnthropicProvider
from app.providers.google_provider import GoogleProvider
from app.providers.openai_compatible import PLACEHOLDER_KEY, OpenAICompatibleProvider
from app.providers.openai_provider import OpenAIProvider
from app.providers.replay import ReplayProvider
from tests.providers.harness import ask, drain
from tests.providers.wire_servers import Answer, WireServer

ALL_KEYS = {"ANTHROPIC_API_KEY": "ak", "OPENAI_API_KEY": "ok", "GEMINI_API_KEY": "gk"}


@pytest.mark.parametrize(
    ("requested", "model", "env", "expected"),
    [
        pytest.param(None, None, {}, ProviderChoice("replay", "todo-app"), id="no-key-replay"),
        pytest.param(
            None, "todo-app", ALL_KEYS, ProviderChoice("replay", "todo-app"), id="recording-name"
        ),
        pytest.param(
            "replay", None, ALL_KEYS, ProviderChoice("replay", "todo-app"), id="explicit-replay"
        ),
        pytest.param(
            None,
            None,
            {"OPENAI_API_KEY": "ok"},
            ProviderChoice("openai", "gpt-5.5", "ok"),
            id="only-key",
        ),
        pytest.param(
            None,
            None,
            ALL_KEYS,
            ProviderChoice("anthropic", "claude-sonnet-4-6", "ak"),
            id="first-key",
        ),
        pytest.param(
            None,
            "gemini-2.5-pro",
            ALL_KEYS,
            ProviderChoice("google", "gemini-2.5-pro", "gk"),
            id="by-model",
        ),
        pytest.param(
            "openai",
            "gpt-4.1",
            ALL_KEYS | {"KILN_OPENAI_BASE_URL": "http://gw/v1"},
            ProviderChoice("openai", "gpt-4.1", "ok", "http://gw/v1"),
            id="base-url",
        ),
    ],
)
def test_resolve(
    requested: str | None, model: str | None, env: dict[str, str], expected: ProviderChoice
) -> None:
    assert resolve_provider(requested, model, env) == expected


def test_explicit_keys_beat_the_environment() -> None:
    choice = resolve_provider("google", None, {"GEMINI_API_KEY": "env"}, {"google": "user"})
    assert choice.api_key == "user"
    assert "user" not in repr(choice)


@pytest.mark.parametrize(
    ("requested", "model", "env", "error", "match"),
    [
        pytest.param(
            None,
            "gemini-2.5-flash",
            {"OPENAI_API_KEY": "ok"},
            ModelRefused,
            "GEMINI_API_KEY",
            id="gemini-with-openai-key",
        ),
        pytest.param(
            "openai", "gemini-2.5-flash", ALL_KEYS, ModelRefused, "'google'", id="foreign-model"
        ),
        pytest.param(
            "anthropic",
            None,
            {"OPENAI_API_KEY": "ok"},
            ConfigError,
            "ANTHROPIC_API_KEY",
            id="no-key",
        ),
        pytest.param(
            "mistral", None, ALL_KEYS, ConfigError, "unknown provider", id="unknown-provider"
        ),
        pytest.param(
            None, "../etc/passwd", {}, ModelRefused, "not a recording name", id="bad-name"
        ),
    ],
)
def test_resolve_refuses(
    requested: str | None,
    model: str | None,
    env: dict[str, str],
    error: type[Exception],
    match: str,
) -> None:
    with pytest.raises(error, match=match):
        resolve_provider(requested, model, env)


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        pytest.param("anthropic", AnthropicProvider, id="anthropic"),
        pytest.param("openai", OpenAIProvider, id="openai"),
        pytest.param("google", GoogleProvider, id="google"),
    ],
)
@pytest.mark.anyio
async def test_get_provider_uses_the_environment_key(name: str, cls: type) -> None:
    provider = get_provider(name, env=ALL_KEYS)
    assert isinstance(provider, cls)
    await provider.aclose()


def test_get_provider_without_key_or_with_unknown_name() -> None:
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        get_provider("openai", env={})
    with pytest.raises(ConfigError, match="unknown provider"):
        get_provider("nope", env=ALL_KEYS)


@pytest.fixture(scope="module")
def openai_server() -> Iterator[WireServer]:
    with WireServer("openai") as wire:
        yield wire


@pytest.mark.anyio
async def test_base_url_setting_reaches_the_sdk(openai_server: WireServer) -> None:
    env = {"OPENAI_API_KEY": "ok", "KILN_OPENAI_BASE_URL": f"{openai_server.url}/v1"}
    openai_server.script(Answer())
    provider = resolve_provider(None, "gpt-4.1", env).build(env)
    try:
        assert "".join(await drain(provider.stream(ask("gpt-4.1")))) == "Hello, world!"
    finally:
        await provider.aclose()
    assert openai_server.requests[0].headers["authorization"] == "Bearer ok"


@pytest.mark.anyio
async def test_replay_reads_the_recordings_dir_setting(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("<Response>mine</Response>")
    provider = get_provider("replay", env={"KILN_RECORDINGS_DIR": str(tmp_path)})
    assert isinstance(provider, ReplayProvider)
    stream = provider.stream(ask("mine"))
    assert "".join([delta async for delta in stream]) == "<Response>mine</Response>"


COMPATIBLE_URL = "http://localhost:11434/v1"
COMPATIBLE = {"KILN_OPENAI_COMPATIBLE_BASE_URL": COMPATIBLE_URL}


@pytest.mark.parametrize(
    ("requested", "model", "env", "api_keys", "expected"),
    [
        pytest.param(
            "openai-compatible",
            "qwen2.5-coder:32b",
            COMPATIBLE,
            {},
            ProviderChoice("openai-compatible", "qwen2.5-coder:32b", None, COMPATIBLE_URL),
            id="no-key-needed",
        ),
        pytest.param(
            "openai-compatible",
            None,
            COMPATIBLE | {"KILN_OPENAI_COMPATIBLE_MODEL": "meta-llama/Llama-3.1-8B-Instruct"},
            {},
            ProviderChoice(
                "openai-compatible", "meta-llama/Llama-3.1-8B-Instruct", None, COMPATIBLE_URL
            ),
            id="default-model-setting",
        ),
        pytest.param(
            "openai-compatible",
            "openrouter/anthropic/claude-3.5",
            COMPATIBLE | {"KILN_OPENAI_COMPATIBLE_API_KEY": "env-key"},
            {"openai-compatible": "user-key"},
            ProviderChoice(
                "openai-compatible", "openrouter/anthropic/claude-3.5", "user-key", COMPATIBLE_URL
            ),
            id="stored-key-first",
        ),
        pytest.param(
            None,
            None,
            COMPATIBLE,
            {},
            ProviderChoice("openai-compatible", "llama3.1:8b", None, COMPATIBLE_URL),
            id="only-compatible-configured",
        ),
        pytest.param(
            None,
            None,
            COMPATIBLE | {"OPENAI_API_KEY": "ok"},
            {},
            ProviderChoice("openai", "gpt-5.5", "ok"),
            id="keyed-providers-first",
        ),
        pytest.param(
            None,
            "gpt-4.1",
            COMPATIBLE | {"OPENAI_API_KEY": "ok"},
            {},
            ProviderChoice("openai", "gpt-4.1", "ok"),
            id="model-alone-never-guesses-compatible",
        ),
    ],
)
def test_resolve_openai_compatible(
    requested: str | None,
    model: str | None,
    env: dict[str, str],
    api_keys: dict[str, str],
    expected: ProviderChoice,
) -> None:
    assert resolve_provider(requested, model, env, api_keys) == expected


@pytest.mark.parametrize(
    ("model", "env", "error", "match"),
    [
        pytest.param(
            "llama3.1:8b",
            ALL_KEYS,
            ConfigError,
            "KILN_OPENAI_COMPATIBLE_BASE_URL",
            id="no-base-url",
        ),
        pytest.param(
            "llama3.1:8b",
            {"KILN_OPENAI_COMPATIBLE_BASE_URL": "file:///etc/passwd"},
            ConfigError,
            "http:// or https://",
            id="not-http",
        ),
        pytest.param("llama 3.1", COMPATIBLE, ModelRefused, "'llama 3.1'", id="bad-name"),
    ],
)
def test_resolve_openai_compatible_refuses(
    model: str, env: dict[str, str], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        resolve_provider("openai-compatible", model, env)


def test_a_compatible_model_asked_alone_is_refused_with_a_hint() -> None:
    with pytest.raises(ModelRefused, match="name the provider 'openai-compatible'"):
        resolve_provider(None, "llama3.1:8b", COMPATIBLE)
    with pytest.raises(ModelRefused, match="not a recording name") as caught:
        resolve_provider(None, "llama3.1:8b", {})
    assert "openai-compatible" not in str(caught.value)  # no server: no such hint


def test_a_bad_compatible_setting_does_not_break_other_providers() -> None:
    env = ALL_KEYS | {"KILN_OPENAI_COMPATIBLE_BASE_URL": "ftp://nope"}
    assert resolve_provider("openai", None, env).provider == "openai"


@pytest.mark.parametrize(
    ("env", "api_keys", "expected"),
    [
        pytest.param({}, {}, ["replay"], id="nothing"),
        pytest.param(COMPATIBLE, {}, ["openai-compatible", "replay"], id="compatible"),
        pytest.param(
            {"GEMINI_API_KEY": "gk"},
            {"anthropic": "ak"},
            ["anthropic", "google", "replay"],
            id="keys",
        ),
    ],
)
def test_configured_providers(
    env: dict[str, str], api_keys: dict[str, str], expected: list[str]
) -> None:
    assert configured_providers(env, api_keys) == expected


@pytest.mark.parametrize(
    ("provider", "model", "env", "expected"),
    [
        pytest.param(
            "openai-compatible", "llama3.1:8b", COMPATIBLE, ModelLimits(32_768, 4_096), id="default"
        ),
        pytest.param(
            "openai-compatible",
            "qwen2.5-coder:32b",
            COMPATIBLE
            | {
                "KILN_OPENAI_COMPATIBLE_CONTEXT_WINDOW": "131072",
                "KILN_OPENAI_COMPATIBLE_MAX_OUTPUT_TOKENS": "16384",
            },
            ModelLimits(131_072, 16_384),
            id="settings",
        ),
        pytest.param("openai", "gpt-4.1", {}, ModelLimits(1_047_576, 8_192), id="table"),
        pytest.param("openai", "gpt-4-turbo", {}, ModelLimits(128_000, 4_096), id="table-cap"),
        pytest.param("replay", "todo-app", {}, ModelLimits(200_000, 8_192), id="replay"),
    ],
)
def test_model_limits_are_provider_aware(
    provider: str, model: str, env: dict[str, str], expected: ModelLimits
) -> None:
    assert model_limits(provider, model, env) == expected


def test_model_limits_refuse_a_model_the_provider_does_not_serve() -> None:
    with pytest.raises(ModelRefused, match="'google'"):
        model_limits("openai", "gemini-2.5-flash", {})


@pytest.mark.anyio
async def test_explicit_compatible_choice_streams_from_its_server(
    openai_server: WireServer,
) -> None:
    env = {"KILN_OPENAI_COMPATIBLE_BASE_URL": f"{openai_server.url}/v1/", **ALL_KEYS}
    openai_server.script(Answer())
    choice = resolve_provider("openai-compatible", "llama3.1:8b", env)
    provider = choice.build(env)
    try:
        assert isinstance(provider, OpenAICompatibleProvider)
        stream = provider.stream(ask("llama3.1:8b"))
        assert "".join(await drain(stream)) == "Hello, world!"
    finally:
        await provider.aclose()
    [seen] = openai_server.requests
    assert seen.path == "/v1/chat/completions"  # the trailing '/' of the setting is dropped
    assert seen.headers["authorization"] == f"Bearer {PLACEHOLDER_KEY}"  # not OPENAI_API_KEY


COMPATIBLE_URL = {"KILN_OPENAI_COMPATIBLE_BASE_URL": "http://127.0.0.1:9/v1"}


@pytest.mark.parametrize(
    ("provider", "model", "env"),
    [
        pytest.param("anthropic", "claude-sonnet-4-6", {}, id="claude"),
        pytest.param("openai", "gpt-5", {}, id="gpt-5"),
        pytest.param("openai", "gpt-4o-mini", {}, id="gpt-4o"),
        pytest.param("openai", "o4-mini", {}, id="o4-mini"),
        pytest.param("google", "gemini-2.5-flash", {}, id="gemini"),
        pytest.param("replay", "todo-app", {}, id="replay-ignores-them-and-says-so"),
        pytest.param(
            "openai-compatible",
            "qwen2.5-vl",
            {**COMPATIBLE_URL, "KILN_OPENAI_COMPATIBLE_IMAGES": "1"},
            id="compatible-turned-on",
        ),
    ],
)
def test_images_go_to_a_model_that_reads_them(
    provider: str, model: str, env: dict[str, str]
) -> None:
    refuse_unread_images(ProviderChoice(provider, model), 2, env)


@pytest.mark.parametrize(
    ("provider", "model", "env", "match"),
    [
        pytest.param("openai", "gpt-3.5-turbo", {}, "'gpt-3.5-turbo' cannot read images", id="3.5"),
        pytest.param("openai", "o3-mini", {}, "'o3-mini' cannot read images", id="o3-mini"),
        pytest.param("openai", "gpt-4", {}, "'gpt-4' cannot read images", id="gpt-4"),
        pytest.param(
            "openai-compatible",
            "llama3.1:8b",
            COMPATIBLE_URL,
            "KILN_OPENAI_COMPATIBLE_IMAGES",
            id="compatible-by-default",
        ),
    ],
)
def test_images_for_a_model_that_cannot_read_them_are_refused_in_words(
    provider: str, model: str, env: dict[str, str], match: str
) -> None:
    with pytest.raises(ImagesUnsupported, match=match) as refused:
        refuse_unread_images(ProviderChoice(provider, model), 1, env)
    assert refused.value.code == "images_unsupported"
    refuse_unread_images(ProviderChoice(provider, model), 0, env)  # no images: nothing to refuse
