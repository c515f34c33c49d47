"""kiln's sans-IO streaming tag parser: text chunks in, typed events out. No I/O, no asyncio.

``StreamParser(dialect="edward").feed(chunk) -> list[Event]``, ``.close() -> list[Event]``.
"""

from parser.dialects import DIALECTS, Dialect, Role, TagSpec
from parser.errors import InvalidPackageError, ParseError, UnsafePathError
from parser.events import EVENT_TYPES, Event, merge_adjacent
from parser.stream import StreamParser

__all__ = [
    "DIALECTS",
    "EVENT_TYPES",
    "Dialect",
    "Event",
    "InvalidPackageError",
    "ParseError",
    "Role",
    "StreamParser",
    "TagSpec",
    "UnsafePathError",
    "merge_adjacent",
]
