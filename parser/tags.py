"""Recognising one tag at a ``<``: its name, its end, its attributes.

Pure functions over a string and an offset. A tag is recognised only if its name is one the
current state listens for; anything else at a ``<`` is content. The end of a tag is the first
``>`` outside a quoted attribute value, searched at most :data:`MAX_TAG_LENGTH` characters far, so
a ``<`` in prose never holds text back longer than a tag could be.

The attributes are checked while the ``>`` is searched, because a malformed tag must not be closed
by a *later* tag's ``>`` (swallowing the text and tags between). A quote may only open a value;
after a quoted value comes whitespace, ``/`` or ``>``; a ``<`` outside quotes, a listened tag
inside a quoted value and a quote still open at the length limit are malformed too. The result is
then :class:`Malformed`: the caller reports it and keeps the ``<`` as content.

When the text ends inside a tag that could still become a recognised one, the result is
*partial*: the caller keeps the tail and calls again with more text, passing back the
:class:`TagScan` so the search resumes where it stopped instead of rescanning.
"""

from __future__ import annotations

import html
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

MAX_TAG_LENGTH = 4096

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_:.-]*")
_SPACE = re.compile(r"\s*")
_ATTRIBUTE = re.compile(
    r"""([^\s=/>"'\\]+)"""  # name
    r"""(?:\s*=\s*(?:\\"(.*?)\\"|"([^"]*)"|'([^']*)'|([^\s"'>]+)))?""",  # value
    re.DOTALL,
)
_ENTITY = re.compile(r"&(?:quot|apos|lt|gt|amp|#\d{1,7}|#x[0-9a-fA-F]{1,6});")
# Where the attribute scanner is between calls (``TagScan.phase``).
GAP, NAME, AFTER_NAME, VALUE, UNQUOTED, QUOTED, AFTER_QUOTE = range(7)
_SHOWN = 60  # characters of a malformed tag shown at each end of its message


@dataclass(slots=True)
class TagScan:
    """Progress of an unfinished tag: where the scan stopped, in which phase, the open quote."""

    name: str
    closing: bool
    attrs_start: int
    resume_at: int
    quote: str
    phase: int = GAP


@dataclass(slots=True)
class Tag:
    """A complete tag: ``data[start:end]``; ``name`` lower-cased; attributes unparsed."""

    name: str
    closing: bool
    end: int
    attrs_text: str
    self_closing: bool


class Partial:
    """The text ended inside a tag that may still be recognised; ``scan`` resumes it."""

    __slots__ = ("scan",)

    def __init__(self, scan: TagScan | None) -> None:
        self.scan = scan


class Malformed:
    """A listened tag whose attributes are malformed; ``reason`` names the offending text."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


Names = Mapping[bool, Collection[str]]


def match_tag(
    data: str, start: int, names: Names, prefixes: Names, resume: TagScan | None = None
) -> Tag | Partial | Malformed | None:
    """Recognise the tag at ``data[start] == "<"``.

    ``names[closing]`` are the tag names listened for (lower case), ``prefixes[closing]`` all
    their prefixes. Returns a :class:`Tag`, a :class:`Partial` (need more text), a
    :class:`Malformed` tag, or ``None`` when this ``<`` is content.
    """
    scan = resume if resume is not None else _scan_name(data, start, names, prefixes)
    if scan is None or isinstance(scan, Partial):
        return scan
    return _scan_to_end(data, start, scan, names, prefixes)


def _scan_name(data: str, start: int, names: Names, prefixes: Names) -> TagScan | Partial | None:
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


def _scan_to_end(
    data: str, start: int, scan: TagScan, names: Names, prefixes: Names
) -> Tag | Partial | Malformed | None:
    """Walk the attributes up to the ``>``, checking their shape on the way."""
    limit = min(len(data), start + MAX_TAG_LENGTH)
    pos, phase, quote = start + scan.resume_at, scan.phase, scan.quote
    while pos < limit:
        if phase == QUOTED:
            pos, found = _closing_quote(data, pos, limit, quote, names, prefixes)
            if found == "tag":
                return _malformed(data, start, scan, pos, "a tag inside a quoted value")
            if found != "quote":
                break
            pos, phase, quote = pos + 1, AFTER_QUOTE, ""
            continue
        word = _WORD_ENDS.get(phase)
        if word is not None:  # skip to where the name or unquoted value ends
            hit = word.search(data, pos, limit)
            if hit is None:
                pos = limit
                break
            pos = hit.start()
        char = data[pos]
        if char == ">":
            return _finish(data, start, scan, pos)
        step = _STEPS[phase](data, pos, char)
        if isinstance(step, str):
            return _malformed(data, start, scan, pos, step)
        pos, phase, quote = step
    return _stopped(data, start, scan, pos, phase, quote)


Step = tuple[int, int, str]
_LT = "'<' outside a quoted value"
_QUOTE = "a quote that does not open a value"
_NOT_A_NAME = "text that is not an attribute name"


def _skip_space(data: str, pos: int, phase: int) -> Step:
    return _SPACE.match(data, pos).end(), phase, ""  # type: ignore[union-attr]


def _in_gap(data: str, pos: int, char: str) -> Step | str:
    """Where an attribute name may start."""
    if char.isspace():
        return _skip_space(data, pos, GAP)
    if char == "/":
        return pos + 1, GAP, ""
    if char == "=":
        return "'=' without an attribute name"
    if char == "<":
        return _LT
    if char in "\"'":
        return _QUOTE
    if not (char.isalpha() or char == "_"):
        return _NOT_A_NAME  # e.g. prose running into the tag: it would vanish as a "name"
    return pos, NAME, ""


def _in_name(data: str, pos: int, char: str) -> Step | str:
    """At the character that ends an attribute name."""
    if char.isspace():
        return _skip_space(data, pos, AFTER_NAME)
    if char == "=":
        return pos + 1, VALUE, ""
    if char == "/":
        return pos + 1, GAP, ""
    if char == "<":
        return _LT
    return _QUOTE if char in "\"'" else _NOT_A_NAME


def _after_name(data: str, pos: int, char: str) -> Step | str:
    """After a name and whitespace: ``=`` gives it a value, anything else starts another."""
    if char == "=":
        return pos + 1, VALUE, ""
    return _in_gap(data, pos, char)


def _in_value(data: str, pos: int, char: str) -> Step | str:
    """Right after ``=``: whitespace, then a quoted or unquoted value."""
    if char.isspace():
        return _skip_space(data, pos, VALUE)
    if char in "\"'":
        return pos + 1, QUOTED, char
    if char == "\\":
        return pos + 1, VALUE, ""  # a backslash-escaped quote (some models write them)
    if char == "<":
        return _LT
    return pos, UNQUOTED, ""


def _in_unquoted(data: str, pos: int, char: str) -> Step | str:
    """At the character that ends an unquoted value."""
    if char.isspace():
        return _skip_space(data, pos, GAP)
    return _LT if char == "<" else "a quote inside an unquoted value"


def _after_quote(data: str, pos: int, char: str) -> Step | str:
    """Right after a closing quote only whitespace, ``/`` or ``>`` may follow."""
    if char == "/" or char.isspace():
        return pos + 1, GAP, ""
    return "text right after a quoted value"


_STEPS = {
    GAP: _in_gap,
    NAME: _in_name,
    AFTER_NAME: _after_name,
    VALUE: _in_value,
    UNQUOTED: _in_unquoted,
    AFTER_QUOTE: _after_quote,
}
# A name is letters, digits, '_', ':', '.' and '-' (after a letter or '_'): anything else ends
# it and, unless it is '=', '/', '>' or space, makes the tag malformed.
_WORD_ENDS = {NAME: re.compile(r"[^\w:.-]"), UNQUOTED: re.compile(r"""[\s>"'<]""")}


def _closing_quote(
    data: str, pos: int, limit: int, quote: str, names: Names, prefixes: Names
) -> tuple[int, str]:
    """Find the quote closing a value; a listened tag inside it is ``"tag"``, else where it stops.

    Returns ``(offset, "quote")``, ``(offset of the tag, "tag")``, or ``(resume offset, "")``
    when the value goes on past the text (or the limit).
    """
    close = data.find(quote, pos, limit)
    stop = limit if close < 0 else close
    lt = data.find("<", pos, stop)
    while lt >= 0:
        inner = _scan_name(data, lt, names, prefixes)
        if isinstance(inner, TagScan):
            return lt, "tag"
        if isinstance(inner, Partial):
            return lt, ""  # the text ends in what may become a tag: look again with more
        lt = data.find("<", lt + 1, stop)
    return (close, "quote") if close >= 0 else (limit, "")


def _stopped(
    data: str, start: int, scan: TagScan, pos: int, phase: int, quote: str
) -> Partial | Malformed | None:
    """The scan reached the end of the text (wait for more) or the length limit."""
    if pos >= start + MAX_TAG_LENGTH:
        if phase == QUOTED:
            reason = f"a quote that does not close within {MAX_TAG_LENGTH} characters"
            return _malformed(data, start, scan, start + MAX_TAG_LENGTH - 1, reason)
        return None  # too long to be a tag: content
    scan.resume_at, scan.phase, scan.quote = pos - start, phase, quote
    return Partial(scan)


def _malformed(data: str, start: int, scan: TagScan, bad: int, reason: str) -> Malformed:
    text = data[start : bad + 1]
    if len(text) > 2 * _SHOWN:
        text = f"{text[:_SHOWN]}…{text[-_SHOWN:]}"
    name = f"{'/' if scan.closing else ''}{scan.name}"
    return Malformed(f"malformed <{name}> tag, {reason}: {text!r}")


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
