"""Placeholder comments: the stubs a model leaves, and the ordinary notes it must not flag."""

from __future__ import annotations

import pytest

from app.postgen.stub_comments import STUB_PATTERNS, normalize_comment, stub_pattern

STUBS = [
    " ... rest of the code",
    " ...existing code...",
    "...",
    " … ",
    " ... other components ...",
    " ... same as before",
    " other handlers ...",
    " remaining imports…",
    " rest of the code remains the same",
    " Rest of the component stays unchanged",
    " rest of the file",
    " styles remain the same",
    " everything else stays the same",
    "existing code",
    " keep existing code ",
    " your code here",
    " implementation here",
    " Implementation goes here",
    " add logic here",
    " code goes here",
    " TODO: implement",
    " TODO implement this",
    " todo: implement the function",
    " FIXME: implement",
    " implement me",
    " (omitted for brevity)",
    "\n * ... rest of the styles\n ",
]

ORDINARY = [
    " TODO list item component",
    " TODO: add dark mode",
    " TODO: implement pagination when the API supports it",
    " Loading...",
    " Wait for it...",
    " Show more...",
    " Handle other cases...",
    " implement debounce to spare the API",
    " Implementation",
    " the logic here is subtle",
    " Business logic here",
    " Render the rest of the list",
    " keep the rest of the list visible",
    " spread the rest of the props",
    " Rest of the app reads this value from context",
    " The rest of the code handles errors",
    " Existing todos are loaded from storage",
    " previous implementation used polling; now websockets",
    " Placeholder avatar",
    " simplified for brevity",
    " same height as the header",
    " Helper functions",
    " ...props are forwarded",
    " eslint-disable-next-line react-hooks/exhaustive-deps",
    " @ts-ignore",
    " prettier-ignore",
    "*\n * Formats a date.\n * @param {Date} date\n ",
    " https://developer.mozilla.org/en-US/docs/Web",
]


@pytest.mark.parametrize("comment", STUBS)
def test_stubs_are_recognised(comment: str) -> None:
    assert stub_pattern(comment) is not None


@pytest.mark.parametrize("comment", ORDINARY)
def test_ordinary_comments_are_not_stubs(comment: str) -> None:
    assert stub_pattern(comment) is None


def test_every_pattern_is_exercised_by_a_stub() -> None:
    used = {stub_pattern(comment) for comment in STUBS}

    assert used == {name for name, _ in STUB_PATTERNS}


def test_normalize_drops_jsdoc_stars_and_case() -> None:
    assert normalize_comment("*\n * Rest OF\n *   the Code\n ") == "rest of the code"
