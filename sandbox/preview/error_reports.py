"""Preview errors: the one normalisation of what a page reports, its dedup and its rate limit.

A raw report comes from a page running generated code (the reporter script the preview proxy
injects, see ``sandbox/preview/reporter.js``) or from the render check's browser. Either way
it is untrusted: :func:`normalize_report` turns it into a :class:`PreviewError` of the shared
shape (``kind``, ``message``, ``stack``, ``source``, ``url``, ``count``) or refuses it (None):

- plain text only: ANSI colour codes (Vite's overlay messages carry them) and control
  characters other than newline and tab are removed; HTML stays text (the UI shows it as text);
- sizes capped: message 2000 characters, stack 4000, url 500, file 300;
- ``source.file`` is a project path (``src/App.jsx``): the page's origin, a leading ``/`` and
  Vite's ``?t=``/``?v=`` query are removed; a file on any other origin is no project file.

:class:`ReportDeduper` merges identical reports (same kind, message and source) within a
window, counting them; :class:`TokenBucket` is the rate limit (requests and reports per
sandbox).
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sandbox.images.templates import WORKSPACE

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
MAX_MESSAGE = 2000
MAX_STACK = 4000
MAX_URL = 500
MAX_FILE = 300
MAX_COUNT = 1_000_000
MAX_LINE = 10_000_000
# ESC [ ... final byte: SGR colours and cursor moves, as terminals (and Vite) write them.
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]")
# Control characters except tab and newline; also the C1 range and lone surrogates.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
# Served paths that are no file of the project: dependencies (Vite's pre-bundled ones too),
# Vite's client and helpers, files outside the root, kiln's reporter.
# React's development warnings (a missing key, ...) go through console.error but say
# "Warning:": shown as warnings, never findings that could fail a run whose app works.
REACT_WARNING = "Warning: "
NOT_PROJECT = ("node_modules/", "@vite/", "@react-refresh", "@id/", "@fs/", "__kiln/")
# A stack frame's location: ``<url>:<line>:<column>`` (Chrome ``at f (url:1:2)``, Firefox
# ``f@url:1:2``).
FRAME = re.compile(r"(?P<url>(?:https?://[^\s()]+?|/[^\s():]+?)):(?P<line>\d+):(?P<column>\d+)")


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
    """One error a preview page reported, normalised (see the module docstring)."""

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

    def with_source(self, source: SourceLocation | None) -> PreviewError:
        """This error pointing at ``source`` (e.g. mapped to the original file)."""
        return PreviewError(self.kind, self.message, self.stack, source, self.url, self.count)

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


def plain_text(value: object, limit: int) -> str:
    """``value`` as plain text of at most ``limit`` characters ('' for a non-string)."""
    if not isinstance(value, str):
        return ""
    # Cut first: a megabyte message costs no more than its kept part (x2 for what is removed).
    text = CONTROL.sub("", ANSI.sub("", value[: limit * 2]))
    return text[:limit]


def project_file(url: str, origin: str) -> str | None:
    """The project path a module URL of ``origin`` names (``src/App.jsx``), or None."""
    if url.startswith(f"{WORKSPACE}/"):  # a file path in the sandbox (Vite's overlay)
        path = url[len(WORKSPACE) :]
    elif url.startswith("/"):
        path = url
    else:
        parts = urlsplit(url)
        if f"{parts.scheme}://{parts.netloc}".lower() != origin.lower().rstrip("/"):
            return None
        path = parts.path
    path = path.partition("?")[0].partition("#")[0].lstrip("/")
    if not path or ".." in path.split("/"):
        return None
    return plain_text(path, MAX_FILE) or None


def whole_number(value: object, low: int, high: int) -> int | None:
    """``value`` if it is an integer in ``[low, high]`` (booleans are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None
    return value


def source_of(raw: object, origin: str) -> SourceLocation | None:
    """A raw ``source`` dict as a :class:`SourceLocation` on ``origin``, or None."""
    if not isinstance(raw, dict):
        return None
    file = project_file(raw["file"], origin) if isinstance(raw.get("file"), str) else None
    line = whole_number(raw.get("line"), 1, MAX_LINE)
    column = whole_number(raw.get("column"), 1, MAX_LINE) or 1
    if file is None or line is None or file.startswith(NOT_PROJECT):
        return None
    return SourceLocation(file, line, column)


def first_frame(stack: str, origin: str) -> SourceLocation | None:
    """The first stack frame in a project file of ``origin`` (a generated position): frames
    in dependencies, Vite's client and kiln's reporter are passed over (nothing to fix there)."""
    for match in FRAME.finditer(stack):
        file = project_file(match["url"], origin)
        line = whole_number(int(match["line"][:9]), 1, MAX_LINE)
        if file is not None and line is not None and not file.startswith(NOT_PROJECT):
            column = whole_number(int(match["column"][:9]), 1, MAX_LINE) or 1
            return SourceLocation(file, line, column)
    return None


def normalize_report(raw: object, *, origin: str) -> PreviewError | None:
    """A raw report (a page's JSON object) as a :class:`PreviewError`; None for junk.

    ``origin`` is the preview's origin (``http://abc.preview.localhost:8000``): URLs on it
    become project paths. Without a usable ``source``, the first stack frame on ``origin``
    is the source (its generated position: :mod:`sandbox.preview.source_map` maps it).
    """
    if not isinstance(raw, dict):
        return None
    kind = raw.get("kind")
    if not isinstance(kind, str) or kind not in KINDS:
        return None
    message = plain_text(raw.get("message"), MAX_MESSAGE).strip()
    stack = plain_text(raw.get("stack"), MAX_STACK)
    if not message and not stack.strip():
        return None
    if kind == "console_error" and message.startswith(REACT_WARNING):
        kind = "console_warn"
    source = source_of(raw.get("source"), origin) or first_frame(stack, origin)
    count = whole_number(raw.get("count"), 1, MAX_COUNT) or 1
    url = plain_text(raw.get("url"), MAX_URL)
    return PreviewError(kind, message, stack, source, url, count)


def merge(errors: Iterable[PreviewError]) -> list[PreviewError]:
    """Identical errors as one each (counts summed), in order of first appearance."""
    merged: dict[tuple[str, str, SourceLocation | None], PreviewError] = {}
    for error in errors:
        seen = merged.get(error.key)
        count = error.count if seen is None else min(seen.count + error.count, MAX_COUNT)
        merged[error.key] = (seen or error).with_count(count)
    return list(merged.values())


class ReportDeduper:
    """Lets the first of identical reports through and counts the repeats for ``window``
    seconds; a repeat after that goes through carrying the count of those it stood for.

    Remembers at most ``capacity`` distinct reports (the oldest forgotten first), so a page
    making up endless distinct messages costs bounded memory.
    """

    def __init__(
        self,
        window: float = 10.0,
        capacity: int = 1000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Merge repeats within ``window`` seconds; remember ``capacity`` reports."""
        self.window = window
        self.capacity = capacity
        self.clock = clock
        # key -> (when it last went through, repeats held back since)
        self._seen: OrderedDict[tuple[str, str, SourceLocation | None], tuple[float, int]] = (
            OrderedDict()
        )

    def admit(self, error: PreviewError) -> PreviewError | None:
        """``error`` to keep (its count including held-back repeats), or None: a repeat."""
        now = self.clock()
        seen = self._seen.get(error.key)
        if seen is not None and now - seen[0] < self.window:
            self._seen[error.key] = (seen[0], min(seen[1] + error.count, MAX_COUNT))
            return None
        held = seen[1] if seen is not None else 0
        self._seen[error.key] = (now, 0)
        self._seen.move_to_end(error.key)
        while len(self._seen) > self.capacity:
            self._seen.popitem(last=False)
        return error.with_count(min(error.count + held, MAX_COUNT))


class TokenBucket:
    """A rate limit: ``rate`` tokens a second, at most ``burst`` saved up."""

    def __init__(
        self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """Start full."""
        if not (rate > 0 and burst >= 1):
            raise ValueError(
                f"a token bucket needs rate > 0 and burst >= 1, got {rate!r}, {burst!r}"
            )
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self._tokens = burst
        self._at = clock()

    def take(self, tokens: float = 1.0) -> bool:
        """Take ``tokens`` if there are that many now; whether it did."""
        now = self.clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens < tokens:
            return False
        self._tokens -= tokens
        return True

    def available(self) -> int:
        """How many whole tokens there are now (without taking any)."""
        now = self.clock()
        return int(min(self.burst, self._tokens + (now - self._at) * self.rate))
