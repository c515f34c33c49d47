"""Lossless accounting for generated streams: every marker put in must come out somewhere.

A generated stream interleaves markup fragments with unique *markers* (``{m0}``, ``{m1}``, ...),
placed where no well-formed tag can absorb them: fragments never hold a bare ``>`` or a quote
outside a complete tag or a malformed tag's start. Whatever the parser makes of the stream,
each marker must then reach an event's field (content, path, arguments, ...) or an error's
message. A marker found nowhere is text the parser lost without a word.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from parser.events import Event

MARKER = re.compile(r"\{m\d+\}")


def number_markers(pieces: Iterable[str], placeholder: str = "{m}") -> tuple[str, list[str]]:
    """Join ``pieces``, replacing each ``placeholder`` in them by a unique marker."""
    parts = "".join(pieces).split(placeholder)
    markers = [f"{{m{index}}}" for index in range(len(parts) - 1)]
    out = [parts[0]]
    for marker, part in zip(markers, parts[1:], strict=True):
        out += [marker, part]
    return "".join(out), markers


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def unaccounted(markers: Iterable[str], events: Iterable[Event]) -> list[str]:
    """The markers that no event field and no error message holds (events merged beforehand)."""
    found = "\x00".join(
        text for event in events for value in event.to_dict().values() for text in _strings(value)
    )
    return [marker for marker in markers if marker not in found]
