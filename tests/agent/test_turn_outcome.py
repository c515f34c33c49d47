"""The turn-outcome resolver: one test per rule, per ordering conflict, and per recording."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from app.agent.turn_outcome import (
    RULES,
    Continue,
    PromptKind,
    Stop,
    StopReason,
    TurnFacts,
    matching_rule,
    resolve_turn_outcome,
)
from app.agent.web_tools import ToolResult
from parser import StreamParser

RECORDINGS = Path(__file__).resolve().parents[3] / "shared" / "recordings"
SEARCH = ToolResult("web_search", "Intl.RelativeTimeFormat examples", True, "1. MDN ...")
BASE = TurnFacts(turn=1, max_turns=12)


def facts(**changes: object) -> TurnFacts:
    return dataclasses.replace(BASE, **changes)  # type: ignore[arg-type]


def test_the_rule_names_are_unique_and_the_last_rule_always_applies() -> None:
    names = [rule.name for rule in RULES]

    assert len(names) == len(set(names))
    assert RULES[-1].applies(BASE)


def test_stop_reasons_are_stable_strings() -> None:
    assert {reason.value for reason in StopReason} == {
        "cancelled",
        "error",
        "budget_exceeded",
        "context_limit_exceeded",
        "code_written",
        "max_turns",
        "done",
        "conversational",
        "no_output",
    }


# One test per rule, in table order.


def test_cancelled_stops() -> None:
    assert resolve_turn_outcome(facts(cancelled=True)) == Stop(StopReason.CANCELLED)


def test_a_fatal_error_stops_with_its_message() -> None:
    outcome = resolve_turn_outcome(facts(fatal_error="sandbox died"))

    assert outcome == Stop(StopReason.ERROR, "sandbox died")


def test_an_exceeded_budget_stops_and_names_it() -> None:
    outcome = resolve_turn_outcome(facts(budgets_exceeded=("tool_calls_per_turn", "run_tokens")))

    assert outcome == Stop(StopReason.BUDGET_EXCEEDED, "tool_calls_per_turn, run_tokens")


def test_written_code_stops() -> None:
    outcome = resolve_turn_outcome(facts(files_written=("src/App.jsx",)))

    assert outcome == Stop(StopReason.CODE_WRITTEN)


def test_a_refused_edit_continues_even_when_the_turn_wrote_files() -> None:
    refused = ToolResult("edit", "src/App.jsx", False, "matches nowhere")
    outcome = resolve_turn_outcome(
        facts(edits_refused=True, files_written=("src/a.js",), tool_results=(refused,))
    )
    assert outcome == Continue(PromptKind.CONTINUATION, (refused,))


def test_a_refused_edit_on_the_last_turn_stops_at_max_turns() -> None:
    outcome = resolve_turn_outcome(facts(edits_refused=True, turn=12))
    assert outcome == Stop(StopReason.MAX_TURNS)


def test_tool_results_continue_with_a_continuation_carrying_them() -> None:
    outcome = resolve_turn_outcome(facts(tool_results=(SEARCH,), text_seen=True))

    assert outcome == Continue(PromptKind.CONTINUATION, (SEARCH,))


def test_tool_results_on_the_last_turn_stop_at_max_turns() -> None:
    outcome = resolve_turn_outcome(facts(turn=12, tool_results=(SEARCH,)))

    assert outcome == Stop(StopReason.MAX_TURNS)


def test_the_done_tag_stops() -> None:
    assert resolve_turn_outcome(facts(done_seen=True)) == Stop(StopReason.DONE)


def test_a_reply_in_words_only_is_conversational() -> None:
    assert resolve_turn_outcome(facts(text_seen=True)) == Stop(StopReason.CONVERSATIONAL)


def test_nothing_at_all_is_nudged_once() -> None:
    assert resolve_turn_outcome(BASE) == Continue(PromptKind.NUDGE)


def test_after_the_nudge_nothing_stops_with_no_output() -> None:
    assert resolve_turn_outcome(facts(nudge_used=True)) == Stop(StopReason.NO_OUTPUT)


def test_nothing_on_the_last_turn_stops_at_max_turns() -> None:
    assert resolve_turn_outcome(facts(turn=12)) == Stop(StopReason.MAX_TURNS)


# Ordering conflicts: two facts that point different ways.


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        pytest.param(
            {"cancelled": True, "files_written": ("a.js",)},
            Stop(StopReason.CANCELLED),
            id="cancel-beats-code",
        ),
        pytest.param(
            {"cancelled": True, "fatal_error": "boom"},
            Stop(StopReason.CANCELLED),
            id="cancel-beats-error",
        ),
        pytest.param(
            {"fatal_error": "boom", "budgets_exceeded": ("tool_calls_per_run",)},
            Stop(StopReason.ERROR, "boom"),
            id="error-beats-budget",
        ),
        pytest.param(
            {"budgets_exceeded": ("tool_calls_per_turn",), "files_written": ("a.js",)},
            Stop(StopReason.BUDGET_EXCEEDED, "tool_calls_per_turn"),
            id="budget-beats-code",
        ),
        pytest.param(
            {"budgets_exceeded": ("tool_calls_per_turn",), "tool_results": (SEARCH,)},
            Stop(StopReason.BUDGET_EXCEEDED, "tool_calls_per_turn"),
            id="budget-beats-tool-results",
        ),
        pytest.param(
            {"files_written": ("a.js",), "tool_results": (SEARCH,)},
            Stop(StopReason.CODE_WRITTEN),
            id="code-beats-tool-results",
        ),
        pytest.param(
            {"files_written": ("a.js",), "done_seen": True},
            Stop(StopReason.CODE_WRITTEN),
            id="code-beats-done",
        ),
        pytest.param(
            {"files_written": ("a.js",), "turn": 12},
            Stop(StopReason.CODE_WRITTEN),
            id="code-on-last-turn-is-code",
        ),
        pytest.param(
            {"tool_results": (SEARCH,), "done_seen": True},
            Continue(PromptKind.CONTINUATION, (SEARCH,)),
            id="tool-results-beat-done",
        ),
        pytest.param(
            {"done_seen": True, "text_seen": True},
            Stop(StopReason.DONE),
            id="done-beats-conversational",
        ),
        pytest.param(
            {"done_seen": True, "turn": 12},
            Stop(StopReason.DONE),
            id="done-on-last-turn-is-done",
        ),
        pytest.param(
            {"text_seen": True, "actions_started": True},
            Continue(PromptKind.NUDGE),
            id="words-plus-an-install-without-files-is-nudged",
        ),
        pytest.param(
            {"text_seen": True, "actions_started": True, "nudge_used": True},
            Stop(StopReason.NO_OUTPUT),
            id="words-plus-an-install-after-the-nudge",
        ),
        pytest.param(
            {"text_seen": True, "nudge_used": True},
            Stop(StopReason.CONVERSATIONAL),
            id="conversational-after-the-nudge",
        ),
    ],
)
def test_ordering(changes: dict[str, object], expected: object) -> None:
    assert resolve_turn_outcome(facts(**changes)) == expected


def test_matching_rule_names_the_deciding_rule() -> None:
    assert matching_rule(facts(files_written=("a.js",), done_seen=True)).name == "code_written"


# The recordings, with facts gathered from the real parser.


def facts_from(text: str, turn: int, results: tuple[ToolResult, ...] = ()) -> TurnFacts:
    parser = StreamParser()
    events = [event.to_dict() for event in parser.feed(text) + parser.close()]
    types = {event["type"] for event in events}
    return TurnFacts(
        turn=turn,
        max_turns=12,
        files_written=tuple(e["path"] for e in events if e["type"] == "file_end"),
        tool_results=results,
        done_seen="done" in types,
        text_seen=any(e["type"] == "text" and e["content"].strip() for e in events),
        actions_started=bool(types & {"sandbox_start", "install_start", "command", "web_search"}),
    )


def test_search_then_build_continues_then_stops() -> None:
    lines = (RECORDINGS / "search-then-build.jsonl").read_text().splitlines()
    turns = [json.loads(line)["text"] for line in lines]

    first = resolve_turn_outcome(facts_from(turns[0], 1, (SEARCH,)))
    second = resolve_turn_outcome(facts_from(turns[1], 2))

    assert first == Continue(PromptKind.CONTINUATION, (SEARCH,))
    assert second == Stop(StopReason.CODE_WRITTEN)


@pytest.mark.parametrize(
    ("recording", "expected"),
    [
        pytest.param("todo-vite-react.txt", Stop(StopReason.CODE_WRITTEN), id="todo"),
        pytest.param("hello-conversational.txt", Stop(StopReason.DONE), id="hello"),
    ],
)
def test_single_turn_recordings_stop_after_turn_one(recording: str, expected: Stop) -> None:
    text = (RECORDINGS / recording).read_text()

    assert resolve_turn_outcome(facts_from(text, 1)) == expected
