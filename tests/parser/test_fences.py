"""parser.fences: the one rule for markdown fence lines (parser, sandbox and postgen use it)."""

from __future__ import annotations

import pytest

from parser.fences import (
    FENCE_LINE,
    MAX_FENCE_LINE,
    closes_fence,
    may_close_fence,
    may_open_fence,
    opening_fence,
)


@pytest.mark.parametrize(
    ("line", "fence"),
    [
        pytest.param("```", "```", id="bare-backticks"),
        pytest.param("```tsx", "```", id="language"),
        pytest.param("~~~", "~~~", id="tildes"),
        pytest.param("~~~~python", "~~~~", id="longer-tildes"),
        pytest.param("`````c++", "`````", id="longer-backticks-symbol-language"),
        pytest.param("  ```js  \r", "```", id="indented-trailing-space-cr"),
        pytest.param("\t```objective-c", "```", id="tab-indent"),
    ],
)
def test_opening_fence_lines(line: str, fence: str) -> None:
    assert opening_fence(line) == fence
    assert may_open_fence(line)
    assert FENCE_LINE.fullmatch(line)


@pytest.mark.parametrize(
    "line",
    [
        pytest.param("``", id="two-backticks"),
        pytest.param("~~", id="two-tildes"),
        pytest.param("```js x", id="info-with-prose"),
        pytest.param("``` js", id="space-before-info"),
        pytest.param("```js`", id="backtick-in-info"),
        pytest.param("x```", id="text-before"),
        pytest.param("`~~", id="mixed"),
        pytest.param("```" + "a" * MAX_FENCE_LINE, id="longer-than-the-limit"),
    ],
)
def test_not_fence_lines(line: str) -> None:
    assert opening_fence(line) is None
    assert not FENCE_LINE.fullmatch(line)


@pytest.mark.parametrize(
    ("line", "fence", "closes"),
    [
        pytest.param("```", "```", True, id="same"),
        pytest.param("  ````  ", "```", True, id="longer-indented"),
        pytest.param("``", "```", False, id="shorter"),
        pytest.param("````", "`````", False, id="shorter-than-a-long-opening"),
        pytest.param("~~~", "```", False, id="other-character"),
        pytest.param("```js", "```", False, id="closing-fence-has-no-info"),
        pytest.param(" " * MAX_FENCE_LINE + "```", "```", False, id="longer-than-the-limit"),
    ],
)
def test_closing_fence(line: str, fence: str, closes: bool) -> None:
    assert closes_fence(line, fence) is closes


@pytest.mark.parametrize(
    ("start", "fence", "may"),
    [
        pytest.param("", "```", True, id="empty"),
        pytest.param("  `", "```", True, id="one-backtick"),
        pytest.param("`````", "```", True, id="more-backticks"),
        pytest.param("```\r", "```", True, id="cr"),
        pytest.param("~", "```", False, id="other-character"),
        pytest.param("``x", "```", False, id="text"),
        pytest.param(" " * (MAX_FENCE_LINE + 1), "```", False, id="too-long-to-be-a-fence"),
    ],
)
def test_line_starts_that_may_close(start: str, fence: str, may: bool) -> None:
    assert may_close_fence(start, fence) is may


@pytest.mark.parametrize(
    ("start", "may"),
    [
        pytest.param("", True, id="empty"),
        pytest.param("  ``", True, id="two-backticks"),
        pytest.param("~~~ts", True, id="language-started"),
        pytest.param("``x", False, id="two-backticks-then-text"),
        pytest.param("```js x", False, id="prose-after-language"),
        pytest.param("a", False, id="text"),
    ],
)
def test_line_starts_that_may_open(start: str, may: bool) -> None:
    assert may_open_fence(start) is may


def test_fence_line_scans_whole_texts_line_by_line() -> None:
    text = "a\n```js\ncode\n  ~~~~  \n```js x\nb"
    assert [m.group() for m in FENCE_LINE.finditer(text)] == ["```js", "  ~~~~  "]
