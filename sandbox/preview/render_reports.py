"""Stand-in for helper "reporter"'s ``sandbox/preview/error_reports.py`` (issue 23's shared
contract): the same names and signatures, so the render check calls the one normalisation once
both are merged (the lead then deletes this module and changes one import in
:mod:`sandbox.preview.render_check`).

A raw report is untrusted data from the app's page: anything that is not a mapping with a known
``kind`` and a message is dropped; text is capped (message 2000, stack 4000, url 500 characters).
"""

from __future__ import annotations

from collections.abc import Mapping
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
MESSAGE_CAP, STACK_CAP, URL_CAP = 2000, 4000, 500


@dataclass(slots=True)
class PreviewError:
    """One preview error in the shared contract's shape."""

    kind: str
    message: str
    stack: str
    source: dict[str, Any] | None
    url: str
    count: int = 1

    @property
    def key(self) -> tuple[str, str, str]:
        """What makes two reports the same (merged into one with a ``count``)."""
        return (self.kind, self.message, repr(self.source))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "kind": self.kind,
            "message": self.message,
            "stack": self.stack,
            "source": self.source,
            "url": self.url,
            "count": self.count,
        }


def normalize_report(raw: object, *, origin: str) -> PreviewError | None:
    """``raw`` in the contract's shape, capped; ``None`` for junk. ``origin`` is the dev
    server's (``http://localhost:5173``): a source file is a project path, never a URL."""
    if not isinstance(raw, Mapping) or raw.get("kind") not in KINDS:
        return None
    message = _text(raw.get("message"), MESSAGE_CAP)
    if not message:
        return None
    return PreviewError(
        kind=str(raw["kind"]),
        message=message,
        stack=_text(raw.get("stack"), STACK_CAP),
        source=_source(raw.get("source"), origin),
        url=_text(raw.get("url"), URL_CAP),
    )


def _text(value: object, cap: int) -> str:
    return value[:cap] if isinstance(value, str) else ""


def _source(value: object, origin: str) -> dict[str, Any] | None:
    if not isinstance(value, Mapping) or not isinstance(value.get("file"), str):
        return None
    file = str(value["file"])
    if file.startswith(origin):
        file = file[len(origin) :]
    file = urlsplit(file).path.lstrip("/")[:URL_CAP]
    line, column = value.get("line"), value.get("column")
    if not file or not isinstance(line, int) or line < 1:
        return None
    return {"file": file, "line": line, "column": column if isinstance(column, int) else None}


class ReportDeduper:
    """Merges identical reports (same kind, message and source) into one with a ``count``."""

    def __init__(self) -> None:
        """An empty deduper."""
        self._seen: dict[tuple[str, str, str], PreviewError] = {}

    def add(self, error: PreviewError) -> bool:
        """Keep ``error``; ``False`` when it was merged into an earlier one."""
        earlier = self._seen.get(error.key)
        if earlier is not None:
            earlier.count += error.count
            return False
        self._seen[error.key] = error
        return True

    def errors(self) -> list[PreviewError]:
        """The reports kept, first seen first."""
        return list(self._seen.values())
