"""Run budgets: configuration, the tracker, the context-window check and history trimming."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from app.agent.budgets import (
    ENV_NAMES,
    RUN_TOKENS,
    TOOL_CALLS_PER_RUN,
    TOOL_CALLS_PER_TURN,
    Budgets,
    BudgetTracker,
    trim_history,
)
from app.errors import BudgetExceeded, ConfigError
from app.tokens import MessageLike


@dataclass(frozen=True)
class Msg:
    role: str
    content: str


class WordCounter:
    """One token per word, two per message of framing, one for the reply."""

    def count_message(self, message: MessageLike) -> int:
        return len(message.content.split()) + 2

    def count_request(self, system: str, messages: Sequence[MessageLike]) -> int:
        return len(system.split()) + sum(self.count_message(m) for m in messages) + 1


def test_defaults() -> None:
    budgets = Budgets()

    assert budgets.max_turns == 12
    assert budgets.max_run_tokens == 0


def test_from_env_reads_every_setting() -> None:
    environ = {variable: str(index + 3) for index, variable in enumerate(ENV_NAMES.values())}

    budgets = Budgets.from_env(environ)

    for index, name in enumerate(ENV_NAMES):
        assert getattr(budgets, name) == index + 3


def test_from_env_keeps_defaults_for_unset_and_blank() -> None:
    assert Budgets.from_env({"KILN_MAX_TURNS": " "}) == Budgets()


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        pytest.param("KILN_MAX_TURNS", "twelve", "KILN_MAX_TURNS.*'twelve'", id="not-a-number"),
        pytest.param("KILN_MAX_TURNS", "0", "KILN_MAX_TURNS='0'.*>= 1", id="zero-turns"),
        pytest.param(
            "KILN_MAX_TOOL_CALLS_PER_RUN", "-1", "KILN_MAX_TOOL_CALLS_PER_RUN", id="negative"
        ),
        pytest.param(
            "KILN_MAX_RUN_TOKENS", "-5", "KILN_MAX_RUN_TOKENS='-5'.*>= 0", id="negative-tokens"
        ),
    ],
)
def test_from_env_refuses_bad_values(variable: str, value: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        Budgets.from_env({variable: value})


def test_zero_fixup_turns_and_unlimited_tokens_are_allowed() -> None:
    budgets = Budgets.from_env({"KILN_MAX_FIXUP_TURNS": "0", "KILN_MAX_RUN_TOKENS": "0"})

    assert budgets.max_fixup_turns == 0


def test_turns_are_counted_up_to_the_maximum() -> None:
    tracker = BudgetTracker(Budgets(max_turns=2))

    assert tracker.start_turn().turn == 1
    assert tracker.start_turn().turn == 2
    assert tracker.turns_left == 0
    with pytest.raises(BudgetExceeded, match="2 turns"):
        tracker.start_turn()


def test_reaching_a_tool_budget_is_not_exceeding_it() -> None:
    tracker = BudgetTracker(Budgets(max_tool_calls_per_turn=2))
    tracker.start_turn()

    assert tracker.allow_tool_call()
    assert tracker.allow_tool_call()
    assert tracker.exceeded() == ()
    assert not tracker.allow_tool_call()
    assert tracker.exceeded() == (TOOL_CALLS_PER_TURN,)
    assert tracker.turns[0].refused_tool_calls == 1


def test_the_per_turn_budget_starts_afresh_each_turn() -> None:
    tracker = BudgetTracker(Budgets(max_tool_calls_per_turn=1, max_tool_calls_per_run=10))
    tracker.start_turn()
    assert tracker.allow_tool_call()
    tracker.start_turn()

    assert tracker.allow_tool_call()
    assert tracker.tool_calls == 2
    assert tracker.exceeded() == ()


def test_the_run_budget_spans_turns() -> None:
    tracker = BudgetTracker(Budgets(max_tool_calls_per_turn=5, max_tool_calls_per_run=3))
    tracker.start_turn()
    for _ in range(2):
        assert tracker.allow_tool_call()
    tracker.start_turn()
    assert tracker.allow_tool_call()

    assert not tracker.allow_tool_call()
    assert tracker.exceeded() == (TOOL_CALLS_PER_RUN,)


def test_token_budget_is_checked_against_the_total() -> None:
    tracker = BudgetTracker(Budgets(max_run_tokens=100))
    tracker.start_turn()
    tracker.record_usage(60, 40)
    assert tracker.exceeded() == ()
    tracker.start_turn()
    tracker.record_usage(1, 0)

    assert tracker.exceeded() == (RUN_TOKENS,)
    assert tracker.total_tokens == 101


def test_unlimited_tokens_never_exceed() -> None:
    tracker = BudgetTracker(Budgets())
    tracker.start_turn()
    tracker.record_usage(10**9, 10**9)

    assert tracker.exceeded() == ()


def test_usage_needs_a_started_turn() -> None:
    with pytest.raises(RuntimeError, match="start_turn"):
        BudgetTracker(Budgets()).allow_tool_call()


def test_usage_record() -> None:
    tracker = BudgetTracker(Budgets(max_tool_calls_per_turn=1))
    tracker.start_turn()
    tracker.allow_tool_call()
    tracker.allow_tool_call()
    tracker.record_usage(10, 5)

    assert tracker.to_dict() == {
        "turns": [
            {
                "turn": 1,
                "tool_calls": 1,
                "refused_tool_calls": 1,
                "input_tokens": 10,
                "output_tokens": 5,
            }
        ],
        "tool_calls": 1,
        "total_tokens": 15,
        "exceeded": [TOOL_CALLS_PER_TURN],
    }


def test_an_estimated_usage_is_marked_in_the_record() -> None:
    tracker = BudgetTracker(Budgets())
    tracker.start_turn()
    tracker.record_usage(10, 5)
    tracker.start_turn()
    tracker.record_usage(20, 7, estimated=True)

    first, second = tracker.to_dict()["turns"]
    assert "estimated" not in first
    assert second["estimated"] is True
    resumed = BudgetTracker.from_dict(Budgets(), tracker.to_dict())
    assert resumed.to_dict() == tracker.to_dict()


def test_the_fit_leaves_room_for_the_output() -> None:
    messages = [Msg("user", "one two three")]  # 3 + 2, plus 1 system word, plus 1 = 7

    fits = trim_history(
        WordCounter(), "system", [], messages, context_window=10, reserved_output_tokens=3
    ).fit
    too_big = trim_history(
        WordCounter(), "system", [], messages, context_window=10, reserved_output_tokens=4
    ).fit

    assert fits.prompt_tokens == 7
    assert fits.fits
    assert not too_big.fits
    assert "7 tokens" in too_big.describe()
    assert "leaves 6" in too_big.describe()


def _history(count: int) -> list[Msg]:
    return [Msg("user" if i % 2 == 0 else "assistant", f"m{i} " * 8) for i in range(count)]


def test_everything_is_kept_when_it_fits() -> None:
    history, current = _history(4), [Msg("user", "build it")]

    trimmed = trim_history(
        WordCounter(), "sys", history, current, context_window=1000, reserved_output_tokens=10
    )

    assert trimmed.messages == [*history, *current]
    assert trimmed.dropped == 0
    assert trimmed.fit.fits


def test_the_oldest_messages_go_first_and_whole() -> None:
    history, current = _history(6), [Msg("user", "build it")]  # 10 tokens per old message
    # sys 1 + current 4 + priming 1 = 6; a window of 50 - 10 reserved leaves room for 3 messages.

    trimmed = trim_history(
        WordCounter(), "sys", history, current, context_window=50, reserved_output_tokens=10
    )

    assert trimmed.messages[-1] is current[0]
    assert trimmed.messages[:-1] == history[4:]  # m3 would fit but starts with an assistant
    assert trimmed.dropped == 4
    assert trimmed.fit.fits


def test_a_leading_assistant_message_is_dropped_even_when_it_fits() -> None:
    history = [Msg("assistant", "welcome"), Msg("user", "hi"), Msg("assistant", "hello")]

    trimmed = trim_history(
        WordCounter(),
        "",
        history,
        [Msg("user", "go")],
        context_window=999,
        reserved_output_tokens=1,
    )

    assert [m.content for m in trimmed.messages] == ["hi", "hello", "go"]
    assert trimmed.dropped == 1


def test_the_current_run_is_never_trimmed() -> None:
    current = [Msg("user", "word " * 100), Msg("assistant", "x"), Msg("user", "continue")]

    trimmed = trim_history(
        WordCounter(), "sys", _history(4), current, context_window=50, reserved_output_tokens=10
    )

    assert trimmed.messages == current
    assert trimmed.dropped == 4
    assert not trimmed.fit.fits
    assert trimmed.fit.prompt_tokens == WordCounter().count_request("sys", current)
