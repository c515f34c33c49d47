"""Cutting texts to a token budget and sharing a budget fairly."""

from __future__ import annotations

import pytest

from prompts.fitting import Keep, cut_marker, cut_text, fair_shares, truncate_to_tokens


def words(text: str) -> int:
    """A stand-in tokenizer: one token per whitespace-separated word."""
    return len(text.split())


def test_a_text_that_fits_is_returned_unchanged() -> None:
    assert truncate_to_tokens("a b c", 3, words, Keep.HEAD) == "a b c"


@pytest.mark.parametrize(
    ("keep", "kept"),
    [
        pytest.param(Keep.HEAD, "w0 w1", id="head"),
        pytest.param(Keep.TAIL, "w98 w99", id="tail"),
    ],
)
def test_a_cut_keeps_one_end_and_says_how_much_was_cut(keep: Keep, kept: str) -> None:
    text = " ".join(f"w{i}" for i in range(100))
    budget = words(cut_marker(0, keep)) + 2

    result = truncate_to_tokens(text, budget, words, keep)

    assert words(result) <= budget
    assert kept in result
    assert "characters cut to fit the prompt" in result
    assert ("more" if keep is Keep.HEAD else "earlier") in result


def test_the_cut_is_the_longest_that_fits() -> None:
    text = "x" * 1000
    result = truncate_to_tokens(text, 60, len, Keep.HEAD)

    assert len(result) <= 60
    assert len(truncate_to_tokens(text, 61, len, Keep.HEAD)) == 61


def test_nothing_is_returned_when_not_even_the_marker_fits() -> None:
    assert truncate_to_tokens("x" * 1000, 3, len, Keep.HEAD) == ""


def test_cut_text_counts_the_characters_left_out() -> None:
    assert cut_text("abcdef", 2, Keep.TAIL) == f"{cut_marker(4, Keep.TAIL)}\nef"


@pytest.mark.parametrize(
    ("sizes", "total", "expected"),
    [
        pytest.param([10, 10], 100, [10, 10], id="everything-fits"),
        pytest.param([5, 100, 100], 105, [5, 50, 50], id="small-stays-whole"),
        pytest.param([30, 30, 30], 60, [20, 20, 20], id="equal-shares"),
        pytest.param([7], 0, [0], id="nothing-to-share"),
        pytest.param([], 50, [], id="no-items"),
    ],
)
def test_fair_shares(sizes: list[int], total: int, expected: list[int]) -> None:
    shares = fair_shares(sizes, total)

    assert shares == expected
    assert sum(shares) <= max(total, 0)
