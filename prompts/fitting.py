"""Fitting text into a token budget: cutting one text, and sharing a budget among several.

The composer never knows the tokenizer; callers pass ``count_tokens`` (``app.tokens`` gives the
real one, tests may pass ``len``). Cuts are whole characters found by binary search on the
length, so they cost O(log n) counts, and every cut text carries a visible marker saying how much
was left out: a model must never mistake a cut text for the whole of it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import Enum

CountTokens = Callable[[str], int]


class PromptBudgetError(ValueError):
    """Even the fixed parts of a prompt do not fit its token budget."""

    code = "prompt_budget_exceeded"


class Keep(Enum):
    """Which end of a text to keep when it is cut."""

    HEAD = "head"  # search results and pages: the best matches come first
    TAIL = "tail"  # command and build output: the error is usually at the end


def cut_marker(cut_chars: int, keep: Keep) -> str:
    """The line that replaces the ``cut_chars`` characters left out of a text."""
    where = "more" if keep is Keep.HEAD else "earlier"
    return f"[... {cut_chars} {where} characters cut to fit the prompt ...]"


def cut_text(text: str, keep_chars: int, keep: Keep) -> str:
    """``text`` with only ``keep_chars`` characters of one end kept, plus a marker."""
    if keep_chars >= len(text):
        return text
    marker = cut_marker(len(text) - keep_chars, keep)
    if keep is Keep.HEAD:
        return f"{text[:keep_chars]}\n{marker}"
    return f"{marker}\n{text[len(text) - keep_chars :]}"


def truncate_to_tokens(text: str, max_tokens: int, count_tokens: CountTokens, keep: Keep) -> str:
    """The longest cut of ``text`` (marker included) that counts at most ``max_tokens``.

    Returns ``text`` itself when it fits, and an empty string when not even the marker fits.
    """
    if count_tokens(text) <= max_tokens:
        return text
    low, high = 0, len(text) - 1  # the answer keeps between low and high characters
    if count_tokens(cut_text(text, 0, keep)) > max_tokens:
        return ""
    while low < high:
        middle = (low + high + 1) // 2
        if count_tokens(cut_text(text, middle, keep)) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    return cut_text(text, low, keep)


def fair_shares(sizes: Sequence[int], total: int) -> list[int]:
    """Split ``total`` among items of ``sizes`` so small items stay whole (water filling).

    Items are served from the smallest up; each gets its size or an equal share of what is
    left, whichever is smaller. The shares never add up to more than ``total``.
    """
    shares = [0] * len(sizes)
    left = max(total, 0)
    order = sorted(range(len(sizes)), key=lambda index: sizes[index])
    for served, index in enumerate(order):
        share = min(sizes[index], left // (len(order) - served))
        shares[index] = share
        left -= share
    return shares
