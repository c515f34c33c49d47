"""Strip a markdown code fence that wraps a whole file.

The parser already removes such fences while it streams; this is the write path's second line of
defence, applied to a file's complete content at ``file_end``. It only strips a fence that truly
wraps the file: a README that merely starts and ends with separate code blocks is left alone.
"""

from __future__ import annotations

import re

_OPENING = re.compile(r"^(?P<fence>`{3,}|~{3,})[\w.+#-]*$")


def strip_wrapping_fence(text: str) -> str:
    """Return ``text`` without a markdown fence wrapping all of it; otherwise ``text`` unchanged.

    A wrapper is an opening fence line (optionally naming a language) as the first non-blank line
    and a bare closing fence of the same character, at least as long, as the last non-blank line,
    with no such closing fence in between (that would mean two separate blocks, not a wrapper).
    """
    lines = text.split("\n")
    filled = [i for i, line in enumerate(lines) if line.strip()]
    if len(filled) < 2:
        return text
    first, last = filled[0], filled[-1]
    opening = _OPENING.match(lines[first].strip())
    if opening is None:
        return text
    fence = opening.group("fence")
    if not _closes(lines[last].strip(), fence):
        return text
    body = lines[first + 1 : last]
    if any(_closes(line.strip(), fence) for line in body):
        return text
    joined = "\n".join(body)
    return joined + "\n" if joined else joined


def _closes(line: str, fence: str) -> bool:
    """Whether ``line`` is a bare closing fence for an opening ``fence``."""
    return len(line) >= len(fence) and line == fence[0] * len(line)
