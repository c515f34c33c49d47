"""Refusing a whole-file rewrite that would lose code: placeholders, or a sharp shrink.

In edit mode a model that rewrites an existing file from memory tends to leave parts out: a
comment such as ``// ... rest of the code unchanged`` stands where the code was, or the file
comes back a fraction of its size. Either way the new content would destroy working code, so
the rewrite is refused for that file, the previous content kept, and the model told why.

Placeholders are recognised by the one rule kiln has for them
(:func:`app.postgen.stub_comments.stub_pattern`), on comments only, and only when the previous
content did not already hold the same comment. A shrink is judged on source files of at least
:data:`MIN_LINES` lines, whose rewrite keeps less than :data:`MIN_KEPT` of the lines.
"""

from __future__ import annotations

import posixpath

from app.postgen.source_scan import (
    CSS_EXTENSIONS,
    HTML_EXTENSIONS,
    JS_EXTENSIONS,
    imports_and_comments,
)
from app.postgen.stub_comments import stub_pattern

REWRITE_REFUSED = "rewrite_refused"
MIN_LINES = 20  # smaller files are often rewritten shorter on purpose
MIN_KEPT = 0.5  # a rewrite with fewer than half the lines of a source file is refused
SOURCE_EXTENSIONS = (*JS_EXTENSIONS, *CSS_EXTENSIONS, *HTML_EXTENSIONS)


def refused_rewrite(path: str, old: str, new: str) -> str | None:
    """Why the rewrite of ``path`` from ``old`` to ``new`` is refused, or ``None``."""
    placeholder = _new_placeholder(path, old, new)
    if placeholder is not None:
        return (
            f"the new content of {path!r} has a placeholder where code was"
            f" ({placeholder}); the rewrite was refused and the previous content kept"
        )
    before, after = old.count("\n"), new.count("\n")
    is_source = posixpath.splitext(path)[1].lower() in SOURCE_EXTENSIONS
    if is_source and before >= MIN_LINES and after < before * MIN_KEPT:
        return (
            f"the new content of {path!r} has {after} lines where the file had {before}:"
            " parts seem left out; the rewrite was refused and the previous content kept"
        )
    return None


def _new_placeholder(path: str, old: str, new: str) -> str | None:
    """The excerpt of a stub comment in ``new`` that ``old`` did not have, if any."""
    scanned = imports_and_comments(path, new)
    if scanned is None:
        return None
    before = imports_and_comments(path, old)
    known = {" ".join(c.text.split()) for c in before[1]} if before else set()
    for comment in scanned[1]:
        text = " ".join(comment.text.split())
        if text not in known and stub_pattern(comment.text) is not None:
            return repr(text[:80])
    return None
