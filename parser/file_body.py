"""How a file body starts and ends: the newline after the tag, CDATA, and wrapping fences.

Models often wrap a file's body in a markdown fence, or in ``<![CDATA[ ... ]]>`` so it may
contain a literal ``</file>``. Both are decided from the first characters of the body
(:func:`classify_body_start`), which the parser holds back only until the decision is made.
A wrapping fence's closing line can only be recognised at the end of the body, so while a body
is fenced the parser holds back the last line if it could be that fence (:func:`fence_tail_start`)
and drops it if the body ends there (:func:`settle_fence_tail`). The decisions depend on the
text only, never on where chunks were split.
"""

from __future__ import annotations

import re
from enum import Enum

PRELUDE_LIMIT = 256  # the longest body start held back while deciding (a fence's info line)
CDATA_OPEN = "<![CDATA["
CDATA_CLOSE = "]]>"

_FENCE_PARTIAL_LINE = re.compile(r"[ \t]*`{0,3}[ \t\r]*")
_FENCE_LINE = re.compile(r"[ \t]*```[ \t\r]*")
_FENCE_TAIL = re.compile(r"\n?[ \t]*```[ \t\r]*(?:\n[ \t\r]*)*")


class BodyStart(Enum):
    """What the first characters of a file body say about it."""

    NEED_MORE = "need_more"
    PLAIN = "plain"
    CDATA = "cdata"
    FENCED = "fenced"


def classify_body_start(data: str, pos: int, final: bool) -> tuple[BodyStart, int]:
    """Classify the body starting at ``data[pos]``; return the kind and where content begins.

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
        return BodyStart.NEED_MORE, pos
    rest_at = at
    while rest_at < end and data[rest_at] in " \t\r\n" and rest_at - pos < PRELUDE_LIMIT:
        rest_at += 1
    undecided = not final and end - pos < PRELUDE_LIMIT
    if data.startswith(CDATA_OPEN, rest_at) or data.startswith(CDATA_OPEN.lower(), rest_at):
        return _after_cdata_marker(data, rest_at + len(CDATA_OPEN), undecided)
    rest = data[rest_at : rest_at + len(CDATA_OPEN)]
    if undecided and (rest_at == end or CDATA_OPEN.startswith(rest.upper())):
        return BodyStart.NEED_MORE, pos
    fence_at = at
    while fence_at < end and data[fence_at] in " \t":
        fence_at += 1
    if data.startswith("```", fence_at):
        newline = data.find("\n", fence_at, pos + PRELUDE_LIMIT)
        if newline >= 0:
            return BodyStart.FENCED, newline + 1
        if undecided:
            return BodyStart.NEED_MORE, pos
        return (BodyStart.FENCED, end) if final else (BodyStart.PLAIN, at)
    if undecided and "```".startswith(data[fence_at : fence_at + 3]):
        return BodyStart.NEED_MORE, pos
    return BodyStart.PLAIN, at


def _after_cdata_marker(data: str, at: int, undecided: bool) -> tuple[BodyStart, int]:
    if data.startswith("\r\n", at):
        return BodyStart.CDATA, at + 2
    if data.startswith("\n", at):
        return BodyStart.CDATA, at + 1
    if undecided and (at == len(data) or (data.startswith("\r", at) and at + 1 == len(data))):
        return BodyStart.NEED_MORE, at
    return BodyStart.CDATA, at


def fence_tail_start(text: str, at_line_start: bool) -> int:
    """Where in ``text`` a possible closing fence begins (``len(text)`` if none can).

    ``text`` is the held tail plus new content of a fenced body; ``at_line_start`` says whether
    the content emitted before ``text`` ended a line. The returned suffix is at most the last
    line plus the line before it when that one is a complete fence line.
    """
    last_newline = text.rfind("\n")
    if last_newline < 0:
        fits = at_line_start and _FENCE_PARTIAL_LINE.fullmatch(text) is not None
        return 0 if fits else len(text)
    if _FENCE_PARTIAL_LINE.fullmatch(text, last_newline + 1) is None:
        return len(text)
    if "`" not in text[last_newline + 1 :]:
        previous = text.rfind("\n", 0, last_newline)
        if _FENCE_LINE.fullmatch(text, previous + 1, last_newline) and (
            previous >= 0 or at_line_start
        ):
            return max(previous, 0)
    return last_newline


def settle_fence_tail(tail: str) -> str:
    """What to keep of a held tail once the body has ended: a closing fence line is dropped."""
    if _FENCE_TAIL.fullmatch(tail):
        return "\n" if tail.startswith("\n") else ""
    return tail
