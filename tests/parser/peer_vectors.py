"""Loading the peer parsers' test vectors and putting their events in comparable form.

The vectors (``<repo>/../shared/peer-vectors``, README there) record the test suites of the seed
"Edward" parser and of bolt.new/bolt.diy as data. Their events are spelled a little differently
from kiln's: Edward writes ``maxResults``, leaves ``path`` off ``file_content``/``file_end`` and
omits absent attributes instead of writing ``null``. :func:`normalise` maps both sides onto one
shape, and :func:`merge_dicts` joins adjacent content pieces, because where a parser splits
content depends on chunking and is not part of any contract.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from parser.events import Error, Event, merge_adjacent

VECTORS_DIR = Path(__file__).resolve().parents[3] / "shared" / "peer-vectors"
CONTENT_TYPES = frozenset({"text", "thinking_content", "file_content"})

EventDict = dict[str, Any]


def load_vectors(filename: str) -> list[dict[str, Any]]:
    """The vectors of one peer parser; fail loudly (never skip) when the data is missing."""
    path = VECTORS_DIR / filename
    if not path.is_file():
        pytest.fail(
            f"peer parser vectors not found: {str(path)!r}; the tests expect the shared data"
            " folder next to the repository (<repo>/../shared/peer-vectors)",
            pytrace=False,
        )
    vectors: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return vectors


def normalise(event: EventDict, *, keep_message: bool = True) -> EventDict:
    """An event dict (kiln's or a peer's) in comparable form.

    ``maxResults`` becomes ``max_results``; ``null`` fields are dropped (peers omit them);
    ``path`` is dropped from ``file_content``/``file_end`` (Edward's events do not carry it;
    the path is compared on ``file_start``). Error wording is not a contract, so
    ``keep_message=False`` drops it.
    """
    out = {
        ("max_results" if key == "maxResults" else key): value
        for key, value in event.items()
        if value is not None
    }
    if out["type"] in ("file_content", "file_end"):
        out.pop("path", None)
    if out["type"] == "error" and not keep_message:
        out.pop("message", None)
    return out


def merge_dicts(events: Iterable[EventDict]) -> list[EventDict]:
    """Join runs of same-typed content events (dict twin of ``merge_adjacent``)."""
    merged: list[EventDict] = []
    for event in events:
        last = merged[-1] if merged else None
        if (
            last is not None
            and event["type"] in CONTENT_TYPES
            and event["type"] == last["type"]
            and event.get("path") == last.get("path")
        ):
            merged[-1] = {**last, "content": last["content"] + event["content"]}
        else:
            merged.append(dict(event))
    return merged


def kiln_dicts(events: Iterable[Event], *, keep_message: bool = True) -> list[EventDict]:
    """kiln's events, merged with ``merge_adjacent``, as normalised dicts."""
    return [normalise(e.to_dict(), keep_message=keep_message) for e in merge_adjacent(events)]


def peer_dicts(events: Iterable[EventDict], *, keep_message: bool = True) -> list[EventDict]:
    """A peer's event dicts, normalised and merged."""
    return merge_dicts(normalise(e, keep_message=keep_message) for e in events)


def is_subsequence(
    needles: Sequence[Any], haystack: Sequence[Any], matches: Callable[[Any, Any], bool]
) -> bool:
    """Whether every needle matches a haystack item, in order (items may lie between)."""
    items = iter(haystack)
    return all(any(matches(needle, item) for item in items) for needle in needles)


def has_fields(partial: EventDict, event: EventDict) -> bool:
    """Whether ``event`` carries every field of ``partial`` with the same value."""
    return all(key in event and event[key] == value for key, value in partial.items())


class AnError:
    """Matches a kiln ``Error`` by code, severity and a fragment of its message.

    Error codes are kiln's contract; the message is prose, so a test pins only the part that
    must be there (the offending value or the construct's name).
    """

    def __init__(self, code: str, mentions: str = "", severity: str = "recoverable") -> None:
        self.code = code
        self.mentions = mentions
        self.severity = severity

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Error):
            return NotImplemented
        return (
            other.code == self.code
            and other.severity == self.severity
            and self.mentions in other.message
        )

    def __repr__(self) -> str:
        return f"AnError({self.code!r}, mentions={self.mentions!r}, severity={self.severity!r})"
