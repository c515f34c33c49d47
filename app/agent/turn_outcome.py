"""After each turn: continue (with which prompt) or stop (why). A pure function of the turn's facts.

:data:`RULES` is the whole policy, one rule per line, first match wins (DESIGN.md, flow step 6):

1. the user cancelled, or something failed fatally: stop;
2. a budget was exceeded: stop;
3. an edit of the turn was refused (its blocks matched nowhere or several places, or were
   malformed): continue with a continuation prompt carrying why and the file as it is - unless
   this was the last turn allowed;
4. the turn wrote code: stop - the app is written, post-generation takes over (even if the turn
   also searched: what the user asked for exists now, and a build error, if any, is fed back by
   the fix-up turns, not by another open-ended turn);
5. the turn produced tool results (search, page, command output): continue with a continuation
   prompt carrying them - unless this was the last turn allowed;
6. the model said ``<edward_done />``: stop;
7. a reply in words only (no action started): stop, it was conversational;
8. anything else made no progress (nothing at all, or an action that led nowhere, such as an
   install without files): nudge once, if a turn is left;
9. otherwise (the nudge is spent): stop, ``no_output``.

A rule that would continue on the last allowed turn stops with ``max_turns`` instead.

``context_limit_exceeded`` is decided before a turn (``app.agent.budgets.trim_history``), not here;
its reason string lives in :class:`StopReason` with the others so every stop has one name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from app.agent.web_tools import ToolResult


class StopReason(StrEnum):
    """Why a run's loop stopped; the values are stable (stored, shown, tested)."""

    CANCELLED = "cancelled"
    ERROR = "error"
    BUDGET_EXCEEDED = "budget_exceeded"
    CONTEXT_LIMIT_EXCEEDED = "context_limit_exceeded"
    CODE_WRITTEN = "code_written"
    MAX_TURNS = "max_turns"
    DONE = "done"
    CONVERSATIONAL = "conversational"
    NO_OUTPUT = "no_output"


class PromptKind(StrEnum):
    """Which user message the next turn starts with."""

    CONTINUATION = "continuation"  # prompts.compose.continuation_prompt
    NUDGE = "nudge"  # prompts.compose.nudge_prompt


@dataclass(frozen=True, slots=True)
class TurnFacts:
    """What happened in one turn, as the agent loop saw it."""

    turn: int  # 1-based
    max_turns: int
    files_written: tuple[str, ...] = ()
    tool_results: tuple[ToolResult, ...] = ()  # searches, pages, command outputs for the model
    done_seen: bool = False
    text_seen: bool = False  # visible prose (not thinking)
    actions_started: bool = False  # sandbox opened, install or command queued, ...
    budgets_exceeded: tuple[str, ...] = ()  # BudgetTracker.exceeded()
    nudge_used: bool = False
    cancelled: bool = False
    fatal_error: str | None = None  # the message of an error that ends the run
    edits_refused: bool = False  # an edit the model must redo (its reason is a tool result)

    @property
    def last_turn(self) -> bool:
        """Whether no turn may follow this one."""
        return self.turn >= self.max_turns


@dataclass(frozen=True, slots=True)
class Continue:
    """Run another turn that starts with a ``prompt_kind`` message."""

    prompt_kind: PromptKind
    tool_results: tuple[ToolResult, ...] = ()


@dataclass(frozen=True, slots=True)
class Stop:
    """End the loop; ``detail`` says more (which budget, which error)."""

    reason: StopReason
    detail: str = ""


Outcome = Continue | Stop


@dataclass(frozen=True, slots=True)
class Rule:
    """If ``applies(facts)``, the outcome is ``decide(facts)``."""

    name: str
    applies: Callable[[TurnFacts], bool]
    decide: Callable[[TurnFacts], Outcome]


def _stop(reason: StopReason) -> Callable[[TurnFacts], Outcome]:
    return lambda facts: Stop(reason)


def _error_stop(facts: TurnFacts) -> Outcome:
    return Stop(StopReason.ERROR, facts.fatal_error or "")


def _budget_stop(facts: TurnFacts) -> Outcome:
    return Stop(StopReason.BUDGET_EXCEEDED, ", ".join(facts.budgets_exceeded))


def _continuation(facts: TurnFacts) -> Outcome:
    return Continue(PromptKind.CONTINUATION, facts.tool_results)


def _nudge(facts: TurnFacts) -> Outcome:
    return Continue(PromptKind.NUDGE)


_max_turns = _stop(StopReason.MAX_TURNS)
_conversational = _stop(StopReason.CONVERSATIONAL)


# fmt: off
RULES: tuple[Rule, ...] = (
    Rule("cancelled", lambda f: f.cancelled, _stop(StopReason.CANCELLED)),
    Rule("fatal_error", lambda f: f.fatal_error is not None, _error_stop),
    Rule("budget_exceeded", lambda f: bool(f.budgets_exceeded), _budget_stop),
    Rule("edit_refused_on_last_turn", lambda f: f.edits_refused and f.last_turn, _max_turns),
    Rule("edit_refused", lambda f: f.edits_refused, _continuation),
    Rule("code_written", lambda f: bool(f.files_written), _stop(StopReason.CODE_WRITTEN)),
    Rule("tool_results_on_last_turn", lambda f: bool(f.tool_results) and f.last_turn, _max_turns),
    Rule("tool_results", lambda f: bool(f.tool_results), _continuation),
    Rule("done", lambda f: f.done_seen, _stop(StopReason.DONE)),
    Rule("conversational", lambda f: f.text_seen and not f.actions_started, _conversational),
    Rule("nudge_on_last_turn", lambda f: not f.nudge_used and f.last_turn, _max_turns),
    Rule("nudge", lambda f: not f.nudge_used, _nudge),
    Rule("no_output", lambda f: True, _stop(StopReason.NO_OUTPUT)),
)
# fmt: on


def resolve_turn_outcome(facts: TurnFacts) -> Outcome:
    """The outcome of the first rule of :data:`RULES` that applies to ``facts``."""
    return matching_rule(facts).decide(facts)


def matching_rule(facts: TurnFacts) -> Rule:
    """The first rule that applies (the last rule always does); handy for logs and tests."""
    return next(rule for rule in RULES if rule.applies(facts))
