"""kiln's one rule for markdown code fences around generated files.

Models wrap file bodies in fences; the parser removes a wrapping fence while it streams, the
sandbox's write path removes one again from a complete file, and the post-generation checks blank
stray fence lines. All three use this rule (``parser`` imports nothing of kiln; ``sandbox`` and
``app`` import it from here).

A *fence line* is, as in CommonMark, a run of at least three backticks or at least three tildes,
after optional spaces or tabs. Stricter than CommonMark: the info string after an opening fence is
one word (a language name such as ``tsx`` or ``c++``), so a line of prose that starts with three
backticks is not a fence; and a fence line is at most :data:`MAX_FENCE_LINE` characters, so a
streaming parser never holds back more than that while it waits to see whether a line is one.
A fence is *closed* by a bare fence line of the same character, at least as long as the opening.
"""

from __future__ import annotations

import re

MAX_FENCE_LINE = 256

# Every line that is only a fence (opening or closing), for scanning whole texts line by line.
FENCE_LINE = re.compile(
    rf"^(?=[^\n]{{0,{MAX_FENCE_LINE}}}$)[ \t]*(?:`{{3,}}|~{{3,}})[\w.+#-]*[ \t\r]*$", re.MULTILINE
)
_OPENING = re.compile(r"[ \t]*(?P<fence>`{3,}|~{3,})[\w.+#-]*[ \t\r]*")
# A line start that may still become an opening fence line once more text arrives.
_OPENING_START = re.compile(r"[ \t]*(?:`{1,2}|~{1,2}|(?:`{3,}|~{3,})[\w.+#-]*[ \t\r]*)?")
_BARE = {"`": re.compile(r"[ \t]*(`*)[ \t\r]*"), "~": re.compile(r"[ \t]*(~*)[ \t\r]*")}


def opening_fence(line: str) -> str | None:
    """The fence (its run of backticks or tildes) that ``line`` opens, or ``None``.

    ``line`` is one line without its ``\\n``.
    """
    if len(line) > MAX_FENCE_LINE:
        return None
    match = _OPENING.fullmatch(line)
    return match.group("fence") if match else None


def may_open_fence(start: str) -> bool:
    """Whether ``start``, the beginning of a line, may still become an opening fence line."""
    return len(start) <= MAX_FENCE_LINE and _OPENING_START.fullmatch(start) is not None


def closes_fence(line: str, fence: str) -> bool:
    """Whether ``line`` (no ``\\n``) is a bare fence line that closes ``fence``."""
    match = _BARE[fence[0]].fullmatch(line) if len(line) <= MAX_FENCE_LINE else None
    return match is not None and len(match.group(1)) >= len(fence)


def may_close_fence(start: str, fence: str) -> bool:
    """Whether ``start``, the beginning of a line, may still become a line closing ``fence``."""
    return len(start) <= MAX_FENCE_LINE and _BARE[fence[0]].fullmatch(start) is not None
