"""The run-event declaration: complete for the parser, with words, and the loop's renames."""

from __future__ import annotations

import pytest

from app.event_types import (
    BY_NAME,
    EVENT_TYPES,
    RECORD_EVENTS,
    EventType,
    event_name_of_record,
)
from parser.events import EVENT_TYPES as PARSER_EVENTS


def test_each_type_is_declared_once() -> None:
    assert len(BY_NAME) == len(EVENT_TYPES)


@pytest.mark.parametrize(
    ("emits", "words", "refusal"),
    [
        pytest.param(("worker",), "  ", "'preview_error' has no words", id="no-words"),
        pytest.param(("browser",), "The page broke", "unknown emitters", id="unknown-emitter"),
        pytest.param((), "The page broke", "unknown emitters", id="no-emitter"),
    ],
)
def test_a_type_without_words_or_emitter_is_refused(
    emits: tuple[str, ...], words: str, refusal: str
) -> None:
    with pytest.raises(ValueError, match=refusal):
        EventType("preview_error", emits, words)


def test_every_parser_event_is_declared_with_its_class_fields() -> None:
    assert PARSER_EVENTS.keys() <= BY_NAME.keys()
    assert BY_NAME["edit_block"].all_fields == ("path", "replace", "search", "turn")
    assert BY_NAME["turn_end"].all_fields == ("turn", "rule", "decision", "reason?", "prompt?")


@pytest.mark.parametrize(
    ("record", "event"),
    [
        pytest.param("file", "file_written", id="file"),
        pytest.param("edit", "edit_applied", id="edit"),
        pytest.param("install_start", "install_started", id="install-start"),
        pytest.param("install", "install_finished", id="install"),
        pytest.param("command_start", "command_started", id="command-start"),
        pytest.param("command", "command_finished", id="command"),
        pytest.param("output", "output", id="same-name"),
        pytest.param("restore", "restore", id="versions-record"),
    ],
)
def test_a_session_record_is_published_under_its_event_name(record: str, event: str) -> None:
    assert event_name_of_record(record) == event
    assert event in BY_NAME


def test_records_named_like_parser_events_are_renamed_only_as_records() -> None:
    # The session's "command"/"install_start" records share a parser event's name: the loop
    # renames records only, so the parser's events keep theirs.
    assert set(RECORD_EVENTS) & set(BY_NAME) == {"command", "install_start"}
    assert BY_NAME["command"].emits == ("parser",)
