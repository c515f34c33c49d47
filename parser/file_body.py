"""How a file body starts and ends: the newline after the tag, CDATA, and wrapping fences.

Models often wrap a file's body in a markdown fence, or in ``<![CDATA[ ... ]]>`` so it may
contain a literal ``</file>``. Both are decided from the first characters of the body
(:func:`classify_body_start`), which the parser holds back only until the decision is made.
What a fence is, is :mod:`parser.fences`' rule; blank lines before the opening fence line are
markup too. A wrapping fence's closing line can only be recognised at the end of the body, so
while a body is fenced the parser holds back the last line if it could be that fence
(:func:`fence_tail_start`) and drops it if the body ends there (:func:`settle_fence_tail`). The
decisions depend on the text only, never on where chunks were split.
"""

from __future__ import annotations

from enum import Enum

from parser.events import Event, FileContent, FileEnd
from parser.fences import (
    MAX_FENCE_LINE,
    closes_fence,
    may_close_fence,
    may_open_fence,
    opening_fence,
)

PRELUDE_LIMIT = 256  # the most blank space held back at a body's start while deciding
CDATA_OPEN = "<![CDATA["
CDATA_CLOSE = "]]>"


class BodyStart(Enum):
    """What the first characters of a file body say about it."""

    NEED_MORE = "need_more"
    PLAIN = "plain"
    CDATA = "cdata"
    FENCED = "fenced"


def classify_body_start(data: str, pos: int, final: bool) -> tuple[BodyStart, int, str]:
    """Classify the body starting at ``data[pos]``: its kind, where content begins, its fence.

    One newline right after the opening tag is markup, not content (as HTML treats ``<pre>``).
    ``final`` says no more text will come, so an undecided start is decided as it stands.
    """
    end = len(data)
    at = pos
    if data.startswith("\r\n", at):
        at += 2
    elif data.startswith("\n", at):
        at += 1
    elif data.startswith("\r", at) and at + 1 == end and not final:
        return BodyStart.NEED_MORE, pos, ""
    rest_at = at
    while rest_at < end and data[rest_at] in " \t\r\n" and rest_at - pos < PRELUDE_LIMIT:
        rest_at += 1
    undecided = not final and end - pos < PRELUDE_LIMIT
    if data.startswith(CDATA_OPEN, rest_at) or data.startswith(CDATA_OPEN.lower(), rest_at):
        kind, start = _after_cdata_marker(data, rest_at + len(CDATA_OPEN), undecided)
        return kind, start, ""
    rest = data[rest_at : rest_at + len(CDATA_OPEN)]
    if undecided and (rest_at == end or CDATA_OPEN.startswith(rest.upper())):
        return BodyStart.NEED_MORE, pos, ""
    return _fence_start(data, pos, at, rest_at, final)


def _fence_start(
    data: str, pos: int, at: int, rest_at: int, final: bool
) -> tuple[BodyStart, int, str]:
    """Whether the first non-blank line (at ``rest_at``) opens a fence; plain from ``at`` if not."""
    line_at = data.rfind("\n", at, rest_at) + 1 or at
    newline = data.find("\n", rest_at, line_at + MAX_FENCE_LINE + 1)
    line = data[line_at : newline if newline >= 0 else len(data)]
    if newline >= 0 or final:
        fence = opening_fence(line)
        if fence is None:
            return BodyStart.PLAIN, at, ""
        return BodyStart.FENCED, (newline + 1 if newline >= 0 else len(data)), fence
    if rest_at < len(data) and may_open_fence(line):
        return BodyStart.NEED_MORE, pos, ""
    return BodyStart.PLAIN, at, ""


def _after_cdata_marker(data: str, at: int, undecided: bool) -> tuple[BodyStart, int]:
    if data.startswith("\r\n", at):
        return BodyStart.CDATA, at + 2
    if data.startswith("\n", at):
        return BodyStart.CDATA, at + 1
    if undecided and (at == len(data) or (data.startswith("\r", at) and at + 1 == len(data))):
        return BodyStart.NEED_MORE, at
    return BodyStart.CDATA, at


def fence_tail_start(text: str, at_line_start: bool, fence: str) -> int:
    """Where in ``text`` a possible line closing ``fence`` begins (``len(text)`` if none can).

    ``text`` is the held tail plus new content of a fenced body; ``at_line_start`` says whether
    the content emitted before ``text`` ended a line. The returned suffix is at most the last
    line plus the line before it when that one is a complete closing fence line.
    """
    last_newline = text.rfind("\n")
    if last_newline < 0:
        fits = at_line_start and may_close_fence(text, fence)
        return 0 if fits else len(text)
    if not may_close_fence(text[last_newline + 1 :], fence):
        return len(text)
    if fence[0] not in text[last_newline + 1 :]:
        previous = text.rfind("\n", 0, last_newline)
        if closes_fence(text[previous + 1 : last_newline], fence) and (
            previous >= 0 or at_line_start
        ):
            return max(previous, 0)
    return last_newline


def settle_fence_tail(tail: str, fence: str) -> str:
    """What to keep of a held tail once the body has ended: a closing fence line is dropped."""
    lines = tail.removeprefix("\n").split("\n")
    if closes_fence(lines[0], fence) and all(not line.strip(" \t\r") for line in lines[1:]):
        return "\n" if tail.startswith("\n") else ""
    return tail


class FileBody:
    """The file being written: its tag, its path (``None`` while a refused body is skipped),
    its wrapping fence and the held tail that may be that fence's closing line."""

    __slots__ = ("fence", "line_start", "path", "tag", "tail")

    def __init__(self) -> None:
        self.start("", None)

    def start(self, tag: str, path: str | None) -> None:
        """Begin a body: ``path`` is ``None`` when its content is to be skipped."""
        self.tag, self.path, self.fence, self.tail, self.line_start = tag, path, "", "", True

    def emit(self, text: str, events: list[Event]) -> None:
        """Content of the body; a fenced body holds back what may be its closing fence."""
        if self.path is None:
            return
        if self.fence:
            text = self.tail + text
            cut = fence_tail_start(text, self.line_start, self.fence)
            self.tail, text = text[cut:], text[:cut]
            if not text:
                return
            self.line_start = text[-1] == "\n"
        if text:
            events.append(FileContent(self.path, text))

    def end(self, events: list[Event]) -> None:
        """The body ended: settle the held tail, emit ``file_end``, forget the file."""
        if self.path is not None:
            tail = settle_fence_tail(self.tail, self.fence) if self.fence else ""
            if tail:
                events.append(FileContent(self.path, tail))
            events.append(FileEnd(self.path))
        self.start("", None)
