"""Stand-in for helper "reporter"'s ``sandbox/preview/error_reports.py`` (issue 23's shared
contract): the subset the render check uses, with the same names, fields and semantics
(:class:`SourceLocation`, a frozen :class:`PreviewError`, :func:`normalize_report`,
:func:`merge`). Once both are merged, the lead deletes this module and changes the one import in
:mod:`sandbox.preview.render_check`.

A raw report is untrusted data from the app's page: anything that is not a mapping with a known
``kind`` and a message is dropped; text is capped (message 2000, stack 4000, url 500 characters).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

KINDS = frozenset(
    {
        "uncaught",
        "unhandled_rejection",
        "console_error",
        "console_warn",
        "console_log",
        "vite_error",
        "module_load",
        "network",
        "blank_page",
    }
)
MAX_MESSAGE, MAX_STACK, MAX_URL, MAX_COUNT, MAX_LINE = 2000, 4000, 500, 1_000_000_000, 10**7


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """Where an error points: a project path and a 1-based line and column."""

    file: str
    line: int
    column: int

    def to_dict(self) -> dict[str, Any]:
        """``{"file", "line", "column"}``."""
        return {"file": self.file, "line": self.line, "column": self.column}


@dataclass(frozen=True, slots=True)
class PreviewError:
    """One preview error in the shared contract's shape."""

    kind: str
    message: str
    stack: str
    source: SourceLocation | None
    url: str
    count: int = 1

    @property
    def key(self) -> tuple[str, str, SourceLocation | None]:
        """What makes two reports the same one: kind, message and source."""
        return (self.kind, self.message, self.source)

    def with_count(self, count: int) -> PreviewError:
        """This error merged ``count`` times."""
        return PreviewError(self.kind, self.message, self.stack, self.source, self.url, count)

    def to_dict(self) -> dict[str, Any]:
        """The shared JSON shape of a preview error."""
        return {
            "kind": self.kind,
            "message": self.message,
            "stack": self.stack,
            "source": None if self.source is None else self.source.to_dict(),
            "url": self.url,
            "count": self.count,
        }


def normalize_report(raw: object, *, origin: str) -> PreviewError | None:
    """``raw`` in the contract's shape, capped; ``None`` for junk. A source file on ``origin``
    (``/src/App.jsx`` or the whole URL) becomes a project path (``src/App.jsx``)."""
    if not isinstance(raw, dict) or raw.get("kind") not in KINDS:
        return None
    message = _text(raw.get("message"), MAX_MESSAGE).strip()
    if not message:
        return None
    return PreviewError(
        kind=str(raw["kind"]),
        message=message,
        stack=_text(raw.get("stack"), MAX_STACK),
        source=_source(raw.get("source"), origin),
        url=_text(raw.get("url"), MAX_URL),
        count=_whole(raw.get("count"), MAX_COUNT) or 1,
    )


def merge(errors: Iterable[PreviewError]) -> list[PreviewError]:
    """Identical errors as one each (counts summed), in order of first appearance."""
    merged: dict[tuple[str, str, SourceLocation | None], PreviewError] = {}
    for error in errors:
        seen = merged.get(error.key)
        count = error.count if seen is None else min(seen.count + error.count, MAX_COUNT)
        merged[error.key] = (seen or error).with_count(count)
    return list(merged.values())


def _text(value: object, cap: int) -> str:
    return value[:cap] if isinstance(value, str) else ""


def _whole(value: object, high: int) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        return None
    return value


def _source(value: object, origin: str) -> SourceLocation | None:
    if not isinstance(value, dict) or not isinstance(value.get("file"), str):
        return None
    file = str(value["file"])
    if file.startswith(origin):
        file = file[len(origin) :]
    elif not file.startswith("/"):
        return None  # another origin's file is not the project's
    path = urlsplit(file).path.lstrip("/")[:MAX_URL]
    line = _whole(value.get("line"), MAX_LINE)
    if not path or ".." in path.split("/") or line is None:
        return None
    return SourceLocation(path, line, _whole(value.get("column"), MAX_LINE) or 1)
