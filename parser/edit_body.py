"""The body of an edit tag: search/replace blocks, read line by line as the body streams.

A block is the widely used form, each marker on its own line::

    <<<<<<< SEARCH
    the exact lines to find
    =======
    the lines that replace them
    >>>>>>> REPLACE

Each block becomes an ``edit_block`` event the moment its ``REPLACE`` line is complete. Blank
lines and bare fence lines between blocks are markup. Anything else between blocks, a block whose
``=======`` is missing and a block the body ends inside are reported as ``malformed_edit_block``
errors whose messages hold the text concerned: nothing is dropped without a word. Decisions are
made on complete lines only, so they never depend on where chunks were split.
"""

from __future__ import annotations

import re
from enum import Enum

from parser.events import EditBlock, EditEnd, Error, Event
from parser.fences import FENCE_LINE

SEARCH_MARKER = re.compile(r"[ \t]*<{5,9} ?SEARCH[ \t\r]*")
DIVIDER = re.compile(r"[ \t]*={5,9}[ \t\r]*")
REPLACE_MARKER = re.compile(r"[ \t]*>{5,9} ?REPLACE[ \t\r]*")
MALFORMED = "malformed_edit_block"


class Part(Enum):
    """Where in the body a line falls."""

    OUTSIDE = "outside"
    SEARCH = "search"
    REPLACE = "replace"


class EditBody:
    """The edit being read: its path (``None`` while a refused body is skipped) and block."""

    __slots__ = ("line", "outside", "part", "path", "replace", "search")

    path: str | None
    part: Part
    line: list[str]  # the pieces of the line not complete yet
    search: list[str]
    replace: list[str]
    outside: list[str]  # lines between blocks that are not markup (reported)

    def __init__(self) -> None:
        self.start(None)

    def start(self, path: str | None) -> None:
        """Begin an edit body; ``path`` is ``None`` when its content is to be skipped."""
        self.path, self.part = path, Part.OUTSIDE
        self.line, self.search, self.replace, self.outside = [], [], [], []

    def emit(self, text: str, events: list[Event]) -> None:
        """Body text: every line it completes is read."""
        if self.path is None:
            return
        start = 0
        newline = text.find("\n")
        while newline >= 0:
            self.line.append(text[start : newline + 1])
            line, self.line = "".join(self.line), []
            self._read(line, events)
            start, newline = newline + 1, text.find("\n", newline + 1)
        if start < len(text):
            self.line.append(text[start:])

    def end(self, events: list[Event]) -> None:
        """The body ended: read its last line, report what is unfinished, emit ``edit_end``."""
        if self.path is not None:
            if self.line:
                line, self.line = "".join(self.line), []
                self._read(line, events)
            if self.part is not Part.OUTSIDE:
                self._malformed(events, "the body ended inside a block (no >>>>>>> REPLACE line)")
            self._report_outside(events)
            events.append(EditEnd(self.path))
        self.start(None)

    def _read(self, line: str, events: list[Event]) -> None:
        bare = line.removesuffix("\n")
        if SEARCH_MARKER.fullmatch(bare):
            if self.part is not Part.OUTSIDE:
                self._malformed(events, "a new <<<<<<< SEARCH line came before this block ended")
            self._report_outside(events)
            self.part = Part.SEARCH
        elif self.part is Part.SEARCH:
            self._in_search(line, bare, events)
        elif self.part is Part.REPLACE:
            if REPLACE_MARKER.fullmatch(bare):
                assert self.path is not None
                events.append(EditBlock(self.path, "".join(self.search), "".join(self.replace)))
                self._forget_block()
            else:
                self.replace.append(line)
        elif bare.strip(" \t\r") and not FENCE_LINE.fullmatch(bare):
            self.outside.append(line)

    def _in_search(self, line: str, bare: str, events: list[Event]) -> None:
        if DIVIDER.fullmatch(bare):
            self.part = Part.REPLACE
        elif REPLACE_MARKER.fullmatch(bare):
            self._malformed(events, "the block has no ======= line between SEARCH and REPLACE")
        else:
            self.search.append(line)

    def _malformed(self, events: list[Event], why: str) -> None:
        """Report the open block, with its text, and forget it."""
        text = "".join(self.search)
        if self.part is Part.REPLACE:
            text += "=======\n" + "".join(self.replace)
        message = f"an edit block for {self.path!r} was not applied: {why}; its text: {text!r}"
        events.append(Error(MALFORMED, message))
        self._forget_block()

    def _report_outside(self, events: list[Event]) -> None:
        if self.outside:
            text, self.outside = "".join(self.outside), []
            message = (
                f"text outside a SEARCH/REPLACE block of the edit of {self.path!r} was ignored"
                f" (every change must be a block): {text!r}"
            )
            events.append(Error(MALFORMED, message))

    def _forget_block(self) -> None:
        self.part, self.search, self.replace = Part.OUTSIDE, [], []
