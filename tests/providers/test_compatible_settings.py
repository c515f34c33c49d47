"""The ``openai-compatible`` settings: defaults, values, and each refusal in words."""

from __future__ import annotations

import pytest

from app.errors import ConfigError
from app.providers import get_provider
from app.providers.compatible_settings import CompatibleSettings, check_base_url
from app.providers.models import ModelLimits

URL = "KILN_OPENAI_COMPATIBLE_BASE_URL"


def test_defaults_need_nothing_but_say_the_base_url_is_missing() -> None:
    settings = CompatibleSettings.from_env({})
    assert settings == CompatibleSettings()
    assert settings.limits == ModelLimits(32_768, 4_096)
    assert settings.model == "llama3.1:8b"
    assert settings.images is False  # many local models would drop images without a word
    with pytest.raises(ConfigError, match=URL):
        settings.require_base_url()
    with pytest.raises(ConfigError, match=URL):
        get_provider("openai-compatible", env={})


def test_every_setting_is_read() -> None:
    env = {
        URL: " https://openrouter.ai/api/v1/ ",
        "KILN_OPENAI_COMPATIBLE_API_KEY": "sk-or-v1-abc",
        "KILN_OPENAI_COMPATIBLE_MODEL": "openrouter/anthropic/claude-3.5",
        "KILN_OPENAI_COMPATIBLE_CONTEXT_WINDOW": "200000",
        "KILN_OPENAI_COMPATIBLE_MAX_OUTPUT_TOKENS": "8192",
        "KILN_OPENAI_COMPATIBLE_IMAGES": "true",
    }
    settings = CompatibleSettings.from_env(env)
    assert settings.images is True
    assert settings.require_base_url() == "https://openrouter.ai/api/v1"
    assert settings.api_key == "sk-or-v1-abc"
    assert "sk-or-v1-abc" not in repr(settings)
    assert settings.model == "openrouter/anthropic/claude-3.5"
    assert settings.limits == ModelLimits(200_000, 8_192)


@pytest.mark.parametrize(
    ("env", "match"),
    [
        pytest.param(
            {"KILN_OPENAI_COMPATIBLE_CONTEXT_WINDOW": "0"}, "CONTEXT_WINDOW='0'", id="window-zero"
        ),
        pytest.param(
            {"KILN_OPENAI_COMPATIBLE_MAX_OUTPUT_TOKENS": "4k"}, "TOKENS='4k'", id="cap-not-int"
        ),
        pytest.param(
            {
                "KILN_OPENAI_COMPATIBLE_CONTEXT_WINDOW": "4096",
                "KILN_OPENAI_COMPATIBLE_MAX_OUTPUT_TOKENS": "4096",
            },
            "must be smaller than",
            id="cap-fills-window",
        ),
        pytest.param(
            {"KILN_OPENAI_COMPATIBLE_MODEL": "llama 3"}, "MODEL.*'llama 3'", id="model-space"
        ),
        pytest.param({URL: "localhost:11434/v1"}, "'localhost:11434/v1'", id="no-scheme"),
    ],
)
def test_bad_values_are_refused_in_words(env: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        CompatibleSettings.from_env(env)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        pytest.param("http://localhost:11434/v1", "http://localhost:11434/v1", id="ollama"),
        pytest.param("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000/v1", id="vllm-slash"),
        pytest.param(
            "https://gw.example.com/openai/v1", "https://gw.example.com/openai/v1", id="gw"
        ),
    ],
)
def test_http_base_urls_are_accepted(url: str, expected: str) -> None:
    assert check_base_url(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("file:///etc/passwd", id="file"),
        pytest.param("ftp://host/v1", id="ftp"),
        pytest.param("http:///v1", id="no-host"),
        pytest.param("http://host:port/v1", id="bad-port"),
        pytest.param("http://host/v1?key=1", id="query"),
        pytest.param("http://host/v1#top", id="fragment"),
    ],
)
def test_other_base_urls_are_refused_naming_them(url: str) -> None:
    with pytest.raises(ConfigError, match=repr(url).replace("?", r"\?")):
        check_base_url(url)
