"""EditBody on its own: blocks read line by line, whatever the pieces the text comes in."""

from __future__ import annotations

import pytest

from parser.edit_body import MALFORMED, EditBody
from parser.events import EditBlock, EditEnd, Error, Event

BODY = "<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n<<<<<<< SEARCH\nc\n=======\n>>>>>>> REPLACE"


def read(pieces: list[str]) -> list[Event]:
    body, events = EditBody(), []
    body.start("x.js")
    for piece in pieces:
        body.emit(piece, events)
    body.end(events)
    return events


@pytest.mark.parametrize(
    "pieces",
    [
        pytest.param([BODY], id="whole"),
        pytest.param(list(BODY), id="per-character"),
        pytest.param([BODY[:17], BODY[17:40], BODY[40:]], id="split-inside-markers"),
    ],
)
def test_blocks_come_out_the_same_however_the_body_is_split(pieces: list[str]) -> None:
    assert read(pieces) == [
        EditBlock("x.js", "a\n", "b\n"),
        EditBlock("x.js", "c\n", ""),
        EditEnd("x.js"),
    ]


def test_a_block_is_emitted_as_soon_as_its_replace_line_is_complete() -> None:
    body, events = EditBody(), []
    body.start("x.js")
    body.emit("<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE", events)
    assert events == []
    body.emit("\n", events)
    assert events == [EditBlock("x.js", "a\n", "b\n")]


def test_a_skipped_body_emits_nothing() -> None:
    body, events = EditBody(), []
    body.start(None)
    body.emit(BODY, events)
    body.end(events)
    assert events == []


def test_markers_with_other_counts_and_spaces_are_accepted_prose_is_reported() -> None:
    events = read(["note\n<<<<<<<SEARCH\na\n =====\nb\n>>>>>>>>> REPLACE \n"])
    assert events[1:] == [EditBlock("x.js", "a\n", "b\n"), EditEnd("x.js")]
    assert isinstance(events[0], Error)
    assert events[0].code == MALFORMED
    assert "'note\\n'" in events[0].message
