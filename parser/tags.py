"""Recognising one tag at a ``<``: its name, its end, its attributes.

Pure functions over a string and an offset. A tag is recognised only if its name is one the
current state listens for; anything else at a ``<`` is content. The end of a tag is the first
``>`` outside a quoted attribute value, searched at most :data:`MAX_TAG_LENGTH` characters far, so
a ``<`` in prose never holds text back longer than a tag could be.

When the text ends inside a tag that could still become a recognised one, the result is
*partial*: the caller keeps the tail and calls again with more text, passing back the
:class:`TagScan` so the search for ``>`` resumes where it stopped instead of rescanning.
"""

from __future__ import annotations

import html
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

MAX_TAG_LENGTH = 4096

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_:.-]*")
_QUOTE_OR_END = re.compile(r"""[>"']""")
_ATTRIBUTE = re.compile(
    r"""([^\s=/>"'\\]+)"""  # name
    r"""(?:\s*=\s*(?:\\"(.*?)\\"|"([^"]*)"|'([^']*)'|([^\s"'>]+)))?""",  # value
    re.DOTALL,
)
_ENTITY = re.compile(r"&(?:quot|apos|lt|gt|amp|#\d{1,7}|#x[0-9a-fA-F]{1,6});")


@dataclass(slots=True)
class TagScan:
    """Progress of an unfinished tag: where the ``>`` search stopped and the open quote."""

    name: str
    closing: bool
    attrs_start: int
    resume_at: int
    quote: str


@dataclass(slots=True)
class Tag:
    """A complete tag: ``data[start:end]``; ``name`` lower-cased; attributes unparsed."""

    name: str
    closing: bool
    end: int
    attrs_text: str
    self_closing: bool


NOT_A_TAG = None


class Partial:
    """The text ended inside a tag that may still be recognised; ``scan`` resumes it."""

    __slots__ = ("scan",)

    def __init__(self, scan: TagScan | None) -> None:
        self.scan = scan


def match_tag(
    data: str,
    start: int,
    names: Mapping[bool, Collection[str]],
    prefixes: Mapping[bool, Collection[str]],
    resume: TagScan | None = None,
) -> Tag | Partial | None:
    """Recognise the tag at ``data[start] == "<"``.

    ``names[closing]`` are the tag names listened for (lower case), ``prefixes[closing]`` all
    their prefixes. Returns a :class:`Tag`, a :class:`Partial` (need more text), or ``None``
    when this ``<`` is content.
    """
    scan = resume if resume is not None else _scan_name(data, start, names, prefixes)
    if scan is None or isinstance(scan, Partial):
        return scan
    return _scan_to_end(data, start, scan)


def _scan_name(
    data: str,
    start: int,
    names: Mapping[bool, Collection[str]],
    prefixes: Mapping[bool, Collection[str]],
) -> TagScan | Partial | None:
    end = len(data)
    closing = data.startswith("/", start + 1)
    name_at = start + 2 if closing else start + 1
    if start + 1 >= end:
        return Partial(None) if prefixes[False] or prefixes[True] else None
    if name_at >= end:
        return Partial(None) if prefixes[True] else None
    match = _NAME.match(data, name_at)
    if match is None:
        return None
    name = match.group().lower()
    if match.end() == end:
        return Partial(None) if name in prefixes[closing] else None
    if name not in names[closing] or data[match.end()] not in " \t\r\n/>":
        return None
    return TagScan(name, closing, match.end() - start, match.end() - start, "")


def _scan_to_end(data: str, start: int, scan: TagScan) -> Tag | Partial | None:
    limit = min(len(data), start + MAX_TAG_LENGTH)
    pos = start + scan.resume_at
    quote = scan.quote
    while pos < limit:
        if quote:
            found = data.find(quote, pos, limit)
            if found < 0:
                pos = limit
                break
            quote, pos = "", found + 1
            continue
        hit = _QUOTE_OR_END.search(data, pos, limit)
        if hit is None:
            pos = limit
            break
        if hit.group() == ">":
            return _finish(data, start, scan, hit.start())
        quote, pos = hit.group(), hit.end()
    if limit == len(data) and limit - start < MAX_TAG_LENGTH:
        scan.resume_at, scan.quote = pos - start, quote
        return Partial(scan)
    return None


def _finish(data: str, start: int, scan: TagScan, gt: int) -> Tag:
    attrs_text = data[start + scan.attrs_start : gt]
    self_closing = attrs_text.rstrip().endswith("/")
    return Tag(scan.name, scan.closing, gt + 1, attrs_text, self_closing)


def parse_attributes(text: str) -> dict[str, str]:
    """Attributes of a tag as ``{lower-case name: value}``; the first of a repeated name wins.

    Values may be double-, single- or un-quoted, or wrapped in backslash-escaped double quotes
    (some models escape them). Only the five XML entities and numeric references are decoded:
    attribute values are markup, file bodies are not and are never decoded.
    """
    attrs: dict[str, str] = {}
    for match in _ATTRIBUTE.finditer(text):
        name = match.group(1).lower()
        if name in attrs:
            continue
        value = next((g for g in match.groups()[1:] if g is not None), "")
        attrs[name] = _ENTITY.sub(lambda m: html.unescape(m.group()), value)
    return attrs
