"""Token counting offline: encoding choice, the cache folder, clear errors, and the estimates
the replay provider may fall back to."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.errors import ConfigError
from app.tokens import (
    CL100K,
    MESSAGE_OVERHEAD_TOKENS,
    O200K,
    REPLY_PRIMING_TOKENS,
    SHIPPED_ENCODINGS,
    TokenCounter,
    cache_file_for,
    check_tokenizer,
    count_tokens,
    encoding_name_for,
    get_encoding,
    pacing_encoding,
    split_tokens,
    tiktoken_cache_dir,
    verify_cached_encoding,
)


@pytest.fixture
def cache_dir(monkeypatch: pytest.MonkeyPatch) -> str:
    """A folder holding the real encoding files: the variable's when set, else kiln's own."""
    folder = os.environ.get("TIKTOKEN_CACHE_DIR") or str(SHIPPED_ENCODINGS)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", folder)
    return folder


@dataclass(frozen=True)
class Msg:
    role: str
    content: str


@pytest.mark.parametrize(
    ("provider", "model", "encoding"),
    [
        pytest.param("openai", "gpt-4o", O200K, id="gpt-4o"),
        pytest.param("openai", "gpt-4o-mini-2024-07-18", O200K, id="gpt-4o-mini-dated"),
        pytest.param("openai", "gpt-4.1-nano", O200K, id="gpt-4.1"),
        pytest.param("openai", "gpt-5", O200K, id="gpt-5"),
        pytest.param("openai", "o3-mini", O200K, id="o3"),
        pytest.param("openai", "o1", O200K, id="o1"),
        pytest.param("openai", "ft:gpt-4o:acme::abc", O200K, id="fine-tuned"),
        pytest.param("openai", "gpt-4-turbo", CL100K, id="gpt-4-turbo"),
        pytest.param("openai", "gpt-3.5-turbo", CL100K, id="gpt-3.5"),
        pytest.param("openai", "gpt-9-future", O200K, id="unknown-openai"),
        pytest.param("anthropic", "claude-sonnet-4-5", CL100K, id="claude-approx"),
        pytest.param("google", "gemini-2.5-pro", CL100K, id="gemini-approx"),
        pytest.param("replay", "demo", CL100K, id="replay"),
        pytest.param("Anthropic", "gpt-4o", CL100K, id="provider-decides-family"),
    ],
)
def test_encoding_per_provider_family(provider: str, model: str, encoding: str) -> None:
    assert encoding_name_for(provider, model) == encoding


def test_cache_dir_follows_tiktoken_rules() -> None:
    assert tiktoken_cache_dir({"TIKTOKEN_CACHE_DIR": "/a", "DATA_GYM_CACHE_DIR": "/b"}) == "/a"
    assert tiktoken_cache_dir({"DATA_GYM_CACHE_DIR": "/b"}) == "/b"
    assert tiktoken_cache_dir({}) == str(SHIPPED_ENCODINGS)


def test_kiln_ships_both_encodings_and_loads_them_with_no_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``kiln run`` from a clone works without TIKTOKEN_CACHE_DIR (and leaves it unset)."""
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    found = check_tokenizer()
    assert {path.parent for path in found.values()} == {SHIPPED_ENCODINGS}
    assert TokenCounter.for_model("openai", "gpt-4o").count("Hello, world!") == 4
    assert "TIKTOKEN_CACHE_DIR" not in os.environ


def test_the_shared_cache_holds_both_encodings(cache_dir: str) -> None:
    found = check_tokenizer()

    assert set(found) == {CL100K, O200K}
    assert all(path.parent == Path(cache_dir) for path in found.values())


def test_counts_are_real_tokens(cache_dir: str) -> None:
    counter = TokenCounter.for_model("openai", "gpt-4o")

    assert counter.count("hello world") == 2
    assert not counter.approximate
    assert TokenCounter.for_model("anthropic", "claude-3-5-haiku").approximate


def test_special_token_text_is_counted_not_refused(cache_dir: str) -> None:
    counter = TokenCounter(get_encoding(CL100K))

    assert counter.count("<|endoftext|>") > 1


def test_a_request_counts_system_messages_and_framing(cache_dir: str) -> None:
    counter = TokenCounter(get_encoding(O200K))
    messages = [Msg("user", "hello world"), Msg("assistant", "hi")]

    total = counter.count_request("be brief", messages)

    text = counter.count("be brief") + counter.count("hello world") + counter.count("hi")
    assert total == text + 3 * MESSAGE_OVERHEAD_TOKENS + REPLY_PRIMING_TOKENS
    without_system = total - counter.count("be brief") - MESSAGE_OVERHEAD_TOKENS
    assert counter.count_request("", messages) == without_system


def test_a_missing_encoding_names_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))

    with pytest.raises(ConfigError) as raised:
        check_tokenizer()

    message = str(raised.value)
    assert repr(str(tmp_path)) in message
    assert cache_file_for(CL100K, str(tmp_path)).name in message
    assert "TIKTOKEN_CACHE_DIR" in message


def test_a_corrupt_encoding_file_is_reported(tmp_path: Path, cache_dir: str) -> None:
    shutil.copy(cache_file_for(O200K, cache_dir), tmp_path / cache_file_for(O200K, "").name)
    corrupt = cache_file_for(CL100K, str(tmp_path))
    corrupt.write_bytes(b"not an encoding")

    assert verify_cached_encoding(O200K, str(tmp_path)).is_file()
    with pytest.raises(ConfigError, match="corrupt"):
        verify_cached_encoding(CL100K, str(tmp_path))


def test_an_empty_cache_setting_is_refused() -> None:
    with pytest.raises(ConfigError, match="disables"):
        verify_cached_encoding(CL100K, "")


def test_an_unknown_encoding_is_refused() -> None:
    with pytest.raises(ConfigError, match="'p50k_base'"):
        verify_cached_encoding("p50k_base", "/nowhere")


SAMPLES = [
    pytest.param("Hello, world! Here is a counter app.", id="english"),
    pytest.param("const [count, setCount] = useState(0);\n\n  return <main/>;\n", id="code"),
    pytest.param("emoji 🎉🎉 and 漢字テキスト, accents: déjà vu  \n\t", id="multibyte"),
    pytest.param("a literal <|endoftext|> in the text", id="special-token"),
    pytest.param("", id="empty"),
]


@pytest.fixture
def no_tiktoken(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An empty tiktoken cache: the approximation is used."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))


def test_tiktoken_is_used_when_its_encoding_is_cached() -> None:
    assert pacing_encoding() is not None
    assert count_tokens("Hello, world!") == 4


@pytest.mark.parametrize("text", SAMPLES)
@pytest.mark.parametrize("per_piece", [pytest.param(1, id="1"), pytest.param(3, id="3")])
def test_tiktoken_pieces_are_lossless_and_token_sized(text: str, per_piece: int) -> None:
    pieces = split_tokens(text, per_piece)
    assert "".join(piece for piece, _ in pieces) == text
    assert sum(tokens for _, tokens in pieces) == count_tokens(text)
    # A piece holds the asked-for count, more only to finish a split character, fewer at the end.
    assert all(tokens >= per_piece for _, tokens in pieces[:-1])


@pytest.mark.usefixtures("no_tiktoken")
def test_approximation_without_the_encoding() -> None:
    assert pacing_encoding() is None
    assert count_tokens("Hello, world! Here is a counter app.") == 10


@pytest.mark.usefixtures("no_tiktoken")
@pytest.mark.parametrize("text", SAMPLES)
def test_approximate_pieces_are_lossless(text: str) -> None:
    pieces = split_tokens(text, 2)
    assert "".join(piece for piece, _ in pieces) == text
    assert sum(tokens for _, tokens in pieces) == count_tokens(text)


def test_pieces_need_a_positive_size() -> None:
    with pytest.raises(ValueError, match="positive"):
        split_tokens("text", 0)


@pytest.mark.usefixtures("no_tiktoken")
def test_estimating_is_logged_not_silent(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="app.tokens"):
        count_tokens("Hello, world!")
    assert "replay token counts are estimates" in caplog.text
