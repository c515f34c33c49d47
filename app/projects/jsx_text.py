"""Where an element's text lives in its JSX source, and the text edited there (pure, no I/O).

The preview tags each element with its source location (``data-kiln-source``,
``src/App.jsx:14:7``: the line from 1, the column of the element's ``<`` as Babel counts it,
from 0; a column counted from 1, which points at the tag's name, is taken too). An edit of an
element's text in place (:mod:`app.projects.text_edit`) asks :func:`locate_text` which JSX text
node holds the text the person saw: the element at that location is scanned (its attributes,
its children: text, ``{expressions}``, nested elements, fragments, comments; strings, template
literals and JSX inside expressions are skipped as a whole), and exactly one of its own text
nodes must read, as React renders it (:func:`jsx_text_value`: lines trimmed and joined, entities
decoded), what the person saw. Anything else is refused (:class:`TextEditRefused`, a stable
code each): text built from expressions or several elements, the same text twice in the
element, no such element or text at that place (the file changed since the preview showed it),
a file that is not JSX.

The new text is written as JSX text (:func:`escape_jsx_text`: ``{ } < >`` and what would read
as an entity become entities); the node's surrounding whitespace stays as it was.
"""

from __future__ import annotations

import html.entities
import re
from dataclasses import dataclass

from app.projects.errors import ProjectError
from sandbox import apply_edit_blocks

JSX_SUFFIXES = (".jsx", ".tsx", ".js", ".ts", ".mjs")
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$.:-")
# Where a ``<`` inside an expression starts JSX rather than a comparison: after one of these.
JSX_AFTER = frozenset("(,=?:{[!&|;>")
JSX_KEYWORDS = ("return", "yield", "default")
LOOK_BACK = 40  # characters before a `<` searched for one of JSX_KEYWORDS
ENTITY = re.compile(r"&(?:#(\d+)|#[xX]([0-9a-fA-F]+)|([A-Za-z][A-Za-z0-9]*));")
LINE_BREAK = re.compile(r"\r\n|\n|\r")
ESCAPES = {"{": "&#123;", "}": "&#125;", "<": "&lt;", ">": "&gt;"}

TEXT_EDIT_UNSUPPORTED = "text_edit_unsupported"
TEXT_EDIT_STALE = "text_edit_stale"
TEXT_EDIT_EXPRESSION = "text_edit_expression"
TEXT_EDIT_AMBIGUOUS = "text_edit_ambiguous"


class TextEditRefused(ProjectError):
    """An element's text cannot be edited in place; ``code`` says why (one of the
    ``TEXT_EDIT_*`` codes), the message says it in words."""

    code = "text_edit_refused"

    def __init__(self, code: str, message: str) -> None:
        """A refusal with its stable ``code``."""
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class TextNode:
    """One JSX text child: its source between ``start`` and ``end``."""

    start: int
    end: int
    raw: str

    @property
    def value(self) -> str:
        """The text as React renders it."""
        return jsx_text_value(self.raw)


@dataclass(frozen=True, slots=True)
class JsxElement:
    """An element's tag (``""`` for a fragment), its own text children, and how many of its
    other children are expressions or elements (comments are not counted)."""

    tag: str
    start: int
    end: int
    texts: tuple[TextNode, ...]
    parts: int


def edited_source(
    source: str, line: int, column: int, old_text: str, new_text: str, *, path: str
) -> str:
    """``source`` with the text ``old_text`` of the element at ``line:column`` replaced by
    ``new_text``: applied as one search/replace block (the model's edits' rule) on the lines
    that hold the text node, widened until they occur once in the file."""
    node = locate_text(source, line, column, old_text, where=f"{path}:{line}")
    search, replace = _edit_block(source, node, replaced_raw(node, new_text))
    result = apply_edit_blocks(path, source, [(search, replace)])
    if result.content is None:  # the widened block occurs once: a bug if it does not apply
        raise TextEditRefused(TEXT_EDIT_AMBIGUOUS, result.message)
    return result.content


def _edit_block(source: str, node: TextNode, raw: str) -> tuple[str, str]:
    """``(search, replace)``: the whole lines around ``node``, one more line each side until
    they occur once in ``source``; the replace has ``raw`` in the node's place."""
    start = source.rfind("\n", 0, node.start) + 1
    end = _line_end(source, node.end)
    while source.count(source[start:end]) > 1:
        start = source.rfind("\n", 0, max(start - 1, 0)) + 1
        end = _line_end(source, end + 1)
    return source[start:end], source[start : node.start] + raw + source[node.end : end]


def _line_end(source: str, pos: int) -> int:
    found = source.find("\n", pos)
    return len(source) if found < 0 else found


def locate_text(source: str, line: int, column: int, old_text: str, *, where: str) -> TextNode:
    """The one text node of the element at ``line:column`` that reads ``old_text``; ``where``
    names the place in refusals (``src/App.jsx:14``)."""
    element = element_at(source, offset_of(source, line, column, where=where), where=where)
    wanted = _normalized(old_text)
    found = [node for node in element.texts if _normalized(node.value) == wanted]
    tag = f"<{element.tag}>" if element.tag else "the fragment"
    if len(found) == 1:
        return found[0]
    if found:
        raise TextEditRefused(
            TEXT_EDIT_AMBIGUOUS,
            f"the text {old_text!r} appears {len(found)} times in {tag} at {where}",
        )
    if element.parts:
        raise TextEditRefused(
            TEXT_EDIT_EXPRESSION,
            f"the text of {tag} at {where} is built from expressions or other elements, "
            f"not written as {old_text!r} in one place",
        )
    raise TextEditRefused(
        TEXT_EDIT_STALE,
        f"{tag} at {where} does not hold the text {old_text!r} (the file changed since the "
        "preview showed it?)",
    )


def offset_of(source: str, line: int, column: int, *, where: str) -> int:
    """The offset of the element's ``<`` at ``line`` (from 1) and ``column`` (from 0, or from
    1: then the column points just past the ``<``)."""
    starts = [0, *(match.end() for match in LINE_BREAK.finditer(source))]
    if not 1 <= line <= len(starts) or column < 0:
        raise TextEditRefused(TEXT_EDIT_STALE, f"the file has no place {where}:{column}")
    offset = starts[line - 1] + column
    if source.startswith("<", offset):
        return offset
    if column > 0 and source.startswith("<", offset - 1):
        return offset - 1
    raise TextEditRefused(
        TEXT_EDIT_STALE,
        f"no element starts at {where}:{column} (the file changed since the preview showed it?)",
    )


def element_at(source: str, offset: int, *, where: str) -> JsxElement:
    """The JSX element whose ``<`` is at ``offset``, scanned to its end."""
    return _Scanner(source, where).element(offset)


def jsx_text_value(raw: str) -> str:
    """JSX text as React gets it (Babel's rule): entities decoded; every line but the first
    loses its leading blanks, every line but the last its trailing ones; lines left empty go,
    the others are joined by a space."""
    lines = LINE_BREAK.split(ENTITY.sub(_entity, raw))
    kept = []
    for number, line in enumerate(lines):
        text = line.replace("\t", " ")
        if number:
            text = text.lstrip(" ")
        if number < len(lines) - 1:
            text = text.rstrip(" ")
        if text:
            kept.append(text)
    return " ".join(kept)


def escape_jsx_text(text: str) -> str:
    """``text`` (one line) written as JSX text that renders it: braces and angle brackets as
    entities, an ``&`` that would start an entity as ``&amp;``."""
    text = ENTITY.sub(lambda match: "&amp;" + match.group(0)[1:], text)
    return "".join(ESCAPES.get(char, char) for char in text)


def replaced_raw(node: TextNode, new_text: str) -> str:
    """The node's source with its text replaced by ``new_text`` (its line breaks as spaces),
    the whitespace around the text kept."""
    core = node.raw.strip()
    lead = node.raw[: node.raw.find(core)] if core else node.raw
    tail = node.raw[len(lead) + len(core) :]
    return lead + escape_jsx_text(" ".join(new_text.split())) + tail


def _entity(match: re.Match[str]) -> str:
    decimal, hexadecimal, name = match.groups()
    if decimal or hexadecimal:
        point = int(decimal) if decimal else int(hexadecimal, 16)
        return chr(point) if 0 < point <= 0x10FFFF else match.group(0)
    if name == "apos":
        return "'"
    named = html.entities.name2codepoint.get(name)
    return chr(named) if named is not None else match.group(0)


def _normalized(text: str) -> str:
    """Text compared as the person sees it: whitespace runs as one space, none at the ends."""
    return " ".join(text.split())


class _Scanner:
    """A careful JSX scanner over one file, from one element's ``<`` to its end."""

    def __init__(self, source: str, where: str) -> None:
        self.source, self.where = source, where

    def _incomplete(self) -> TextEditRefused:
        return TextEditRefused(
            TEXT_EDIT_STALE, f"the element at {self.where} is not complete JSX in the file"
        )

    def _at(self, pos: int) -> str:
        if pos >= len(self.source):
            raise self._incomplete()
        return self.source[pos]

    def element(self, start: int) -> JsxElement:
        """The element at ``start`` (its ``<``) and its own text children."""
        pos = self._blanks(start + 1)
        tag_end = pos
        while tag_end < len(self.source) and self.source[tag_end] in NAME_CHARS:
            tag_end += 1
        tag = self.source[pos:tag_end]
        if not tag and not self.source.startswith(">", tag_end):
            raise TextEditRefused(TEXT_EDIT_STALE, f"no element starts at {self.where}")
        pos = self._attributes(tag_end)
        if self.source.startswith("/>", pos):
            return JsxElement(tag, start, pos + 2, (), 0)
        return self._children(tag, start, pos + 1)

    def _attributes(self, pos: int) -> int:
        """Past the attributes: the offset of the opening tag's ``>`` or ``/>``."""
        while True:
            char = self._at(pos)
            if char == ">" or self.source.startswith("/>", pos):
                return pos
            if char == "{":
                pos, _ = self.expression(pos)
            elif char in "\"'":
                pos = self._string_end(pos, escapes=False)
            elif char == "<":
                pos = self.element(pos).end
            else:
                pos += 1

    def _children(self, tag: str, start: int, pos: int) -> JsxElement:
        texts: list[TextNode] = []
        parts = 0
        while True:
            char = self._at(pos)
            if self.source.startswith("</", pos):
                end = self.source.find(">", pos)
                if end < 0:
                    raise self._incomplete()
                return JsxElement(tag, start, end + 1, tuple(texts), parts)
            if char == "<":
                pos, parts = self.element(pos).end, parts + 1
            elif char == "{":
                pos, comment = self.expression(pos)
                parts += 0 if comment else 1
            else:
                end = _text_end(self.source, pos)
                texts.append(TextNode(pos, end, self.source[pos:end]))
                pos = end

    def expression(self, start: int) -> tuple[int, bool]:
        """Past the ``{...}`` at ``start``; whether it held only comments and blanks."""
        pos, depth, comment_only = start + 1, 1, True
        previous = "{"  # the last significant character: tells JSX from a comparison
        while True:
            char = self._at(pos)
            if char == "/" and self.source.startswith(("//", "/*"), pos):
                pos = self._comment_end(pos)
                continue
            if char.isspace():
                pos += 1
                continue
            if char == "}" and depth == 1:
                return pos + 1, comment_only
            comment_only = False
            if char in "\"'`":
                pos = self._string_end(pos)
            elif char == "<" and self._jsx_may_start(pos, previous):
                pos = self.element(pos).end
            else:
                depth += {"{": 1, "}": -1}.get(char, 0)
                pos += 1
            previous = self.source[pos - 1]

    def _jsx_may_start(self, pos: int, previous: str) -> bool:
        """Whether the ``<`` at ``pos`` starts JSX: after an operator or ``return``, and
        followed by a name or ``>`` (``a < b`` is a comparison)."""
        after = self.source[pos + 1 : pos + 2]
        if not (after.isalpha() or after == ">"):
            return False
        before = self.source[max(0, pos - LOOK_BACK) : pos].rstrip()
        return previous in JSX_AFTER or before.endswith(JSX_KEYWORDS)

    def _string_end(self, start: int, *, escapes: bool = True) -> int:
        """Past the string or template literal at ``start`` (JSX attribute strings have no
        escapes: ``escapes=False``)."""
        quote, pos = self.source[start], start + 1
        while True:
            char = self._at(pos)
            if char == "\\" and escapes:
                pos += 2
            elif char == quote:
                return pos + 1
            elif quote == "`" and self.source.startswith("${", pos):
                pos, _ = self.expression(pos + 1)
            else:
                pos += 1

    def _comment_end(self, start: int) -> int:
        if self.source.startswith("//", start):
            end = self.source.find("\n", start)
            return len(self.source) if end < 0 else end + 1
        end = self.source.find("*/", start + 2)
        if end < 0:
            raise self._incomplete()
        return end + 2

    def _blanks(self, pos: int) -> int:
        while pos < len(self.source) and self.source[pos].isspace():
            pos += 1
        return pos


def _text_end(source: str, start: int) -> int:
    """Where the JSX text at ``start`` ends: the next ``<`` or ``{`` (or the file's end)."""
    ends = [found for found in (source.find("<", start), source.find("{", start)) if found >= 0]
    return min(ends) if ends else len(source)
