"""Token counts and token-sized pieces: tiktoken from the local cache, else the approximation."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.providers.tokens import count_tokens, encoding, split_tokens, tokenizer_name

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
    assert tokenizer_name() == "tiktoken:o200k_base"
    assert encoding() is not None
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
    assert tokenizer_name() == "approximate"
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
