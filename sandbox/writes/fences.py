"""Strip a markdown code fence that wraps a whole file.

The parser already removes such fences while it streams; this is the write path's second line of
defence, applied to a file's complete content at ``file_end``. It only strips a fence that truly
wraps the file: a README that merely starts and ends with separate code blocks is left alone.
What a fence line is, is the parser's rule (:mod:`parser.fences`), so both agree.
"""

from __future__ import annotations

from parser.fences import closes_fence, opening_fence


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
    fence = opening_fence(lines[first])
    if fence is None or not closes_fence(lines[last], fence):
        return text
    body = lines[first + 1 : last]
    if any(closes_fence(line, fence) for line in body):
        return text
    joined = "\n".join(body)
    return joined + "\n" if joined else joined
