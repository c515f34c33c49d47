"""A run's limits: turns, tool calls, tokens, and what fits the model's context window.

- :class:`Budgets` - the configured limits (``Budgets.from_env()`` reads ``KILN_MAX_TURNS`` and
  friends, see :data:`ENV_NAMES`).
- :class:`BudgetTracker` - records a run's usage turn by turn and answers "exceeded? which?".
  A limit is *exceeded* when something tried to go past it (the 9th tool call of a turn allowed
  8), not when it was merely reached.
- :func:`trim_history` - before every turn the request (system prompt
  plus messages) must leave ``reserved_output_tokens`` free in the model's window. Trimming drops
  whole messages of earlier conversation, oldest first, and never touches the current run's
  messages (the request and its turns) nor cuts a message in half: when the current run alone
  does not fit, the result says so and the run stops with ``context_limit_exceeded`` rather
  than send the model a mangled request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from app.errors import BudgetExceeded, ConfigError
from app.tokens import MessageLike
from sandbox import EnvReader

TOOL_CALLS_PER_TURN = "tool_calls_per_turn"
TOOL_CALLS_PER_RUN = "tool_calls_per_run"
RUN_TOKENS = "run_tokens"

ENV_NAMES: Mapping[str, str] = {
    "max_turns": "KILN_MAX_TURNS",
    "max_tool_calls_per_turn": "KILN_MAX_TOOL_CALLS_PER_TURN",
    "max_tool_calls_per_run": "KILN_MAX_TOOL_CALLS_PER_RUN",
    "reserved_output_tokens": "KILN_RESERVED_OUTPUT_TOKENS",
    "continuation_budget_tokens": "KILN_CONTINUATION_BUDGET_TOKENS",
    "max_fixup_turns": "KILN_MAX_FIXUP_TURNS",
    "max_run_tokens": "KILN_MAX_RUN_TOKENS",
}
# Settings that may be 0: no fix-up turns; no limit on a run's tokens.
_ZERO_ALLOWED = frozenset({"max_fixup_turns", "max_run_tokens"})


@dataclass(frozen=True, slots=True)
class Budgets:
    """The limits of one run. ``max_run_tokens == 0`` means no limit on tokens."""

    max_turns: int = 12
    max_tool_calls_per_turn: int = 8
    max_tool_calls_per_run: int = 24
    reserved_output_tokens: int = 8192
    continuation_budget_tokens: int = 8000
    max_fixup_turns: int = 2
    max_run_tokens: int = 0

    def __post_init__(self) -> None:
        for name in ENV_NAMES:
            value = getattr(self, name)
            lowest = 0 if name in _ZERO_ALLOWED else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
                raise ConfigError(f"{name} must be a whole number >= {lowest}, got {value!r}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Budgets:
        """The defaults, overridden by any ``KILN_*`` variable of :data:`ENV_NAMES` that is set.

        Raises :class:`ConfigError` naming the variable and its value when one is malformed
        (read by kiln's one environment reader, :class:`sandbox.EnvReader`).
        """
        read = EnvReader(environ, ConfigError)
        defaults = cls()
        return cls(
            **{
                name: read.integer(
                    variable, getattr(defaults, name), low=0 if name in _ZERO_ALLOWED else 1
                )
                for name, variable in ENV_NAMES.items()
            }
        )


@dataclass(slots=True)
class TurnUsage:
    """What one turn used."""

    turn: int
    tool_calls: int = 0
    refused_tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    estimated: bool = False  # kiln counted the tokens itself: the provider reported none

    def to_dict(self) -> dict[str, int]:
        """JSON-ready form (the run's usage record); ``estimated`` only when true (the rare case,
        so every other record keeps its shape)."""
        record = dataclasses.asdict(self)
        if not self.estimated:
            del record["estimated"]
        return record


@dataclass(slots=True)
class BudgetTracker:
    """A run's usage against its :class:`Budgets`, turn by turn."""

    budgets: Budgets
    turns: list[TurnUsage] = field(default_factory=list, init=False)
    _exceeded: list[str] = field(default_factory=list, init=False)

    @property
    def turn(self) -> int:
        """The current turn's number (0 before the first)."""
        return len(self.turns)

    @property
    def turns_left(self) -> int:
        """How many more turns may start."""
        return self.budgets.max_turns - self.turn

    @property
    def tool_calls(self) -> int:
        """Tool calls allowed so far in the run."""
        return sum(usage.tool_calls for usage in self.turns)

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens of every turn so far."""
        return sum(usage.input_tokens + usage.output_tokens for usage in self.turns)

    def start_turn(self) -> TurnUsage:
        """Begin the next turn; raises :class:`BudgetExceeded` when ``max_turns`` are used."""
        if self.turns_left <= 0:
            raise BudgetExceeded(f"all {self.budgets.max_turns} turns of the run are used")
        usage = TurnUsage(turn=self.turn + 1)
        self.turns.append(usage)
        return usage

    def allow_tool_call(self) -> bool:
        """Count a tool call the model asked for; ``False`` (and recorded) if over a budget."""
        usage = self._current()
        if usage.tool_calls >= self.budgets.max_tool_calls_per_turn:
            self._mark(TOOL_CALLS_PER_TURN)
        elif self.tool_calls >= self.budgets.max_tool_calls_per_run:
            self._mark(TOOL_CALLS_PER_RUN)
        else:
            usage.tool_calls += 1
            return True
        usage.refused_tool_calls += 1
        return False

    def record_usage(
        self, input_tokens: int, output_tokens: int, *, estimated: bool = False
    ) -> None:
        """Add the provider's reported token usage to the current turn (``estimated``: kiln's
        own count, for a provider that reported none)."""
        usage = self._current()
        usage.input_tokens += input_tokens
        usage.output_tokens += output_tokens
        usage.estimated = usage.estimated or estimated
        limit = self.budgets.max_run_tokens
        if limit and self.total_tokens > limit:
            self._mark(RUN_TOKENS)

    def exceeded(self) -> tuple[str, ...]:
        """Names of the budgets exceeded so far (:data:`TOOL_CALLS_PER_TURN`, ...), in order."""
        return tuple(self._exceeded)

    @classmethod
    def from_dict(cls, budgets: Budgets, data: Mapping[str, Any]) -> BudgetTracker:
        """A tracker resumed from :meth:`to_dict`'s output (a checkpoint)."""
        tracker = cls(budgets)
        tracker.turns = [TurnUsage(**usage) for usage in data.get("turns", [])]
        tracker._exceeded = list(data.get("exceeded", []))
        return tracker

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready usage of the run."""
        return {
            "turns": [usage.to_dict() for usage in self.turns],
            "tool_calls": self.tool_calls,
            "total_tokens": self.total_tokens,
            "exceeded": list(self._exceeded),
        }

    def _current(self) -> TurnUsage:
        if not self.turns:
            raise RuntimeError("no turn has started; call start_turn() first")
        return self.turns[-1]

    def _mark(self, name: str) -> None:
        if name not in self._exceeded:
            self._exceeded.append(name)


class RequestCounter(Protocol):
    """What counts a request's tokens (``app.tokens.TokenCounter`` fits)."""

    def count_message(self, message: MessageLike) -> int:
        """Tokens of one message, framing included."""
        ...

    def count_request(self, system: str, messages: Sequence[MessageLike]) -> int:
        """Tokens of system prompt plus messages plus reply priming."""
        ...


@dataclass(frozen=True, slots=True)
class ContextFit:
    """How a request's size compares with what the model's window leaves for it."""

    prompt_tokens: int
    context_window: int
    reserved_output_tokens: int

    @property
    def available(self) -> int:
        """Tokens the request may use: the window minus the reserved output."""
        return self.context_window - self.reserved_output_tokens

    @property
    def fits(self) -> bool:
        """Whether the request leaves the reserved output free."""
        return self.prompt_tokens <= self.available

    def describe(self) -> str:
        """A message for the user when it does not fit."""
        return (
            f"the request needs {self.prompt_tokens} tokens but the model's window of"
            f" {self.context_window} leaves {self.available} after reserving"
            f" {self.reserved_output_tokens} for the answer"
        )


M = TypeVar("M", bound=MessageLike)


@dataclass(frozen=True, slots=True)
class Trimmed(Generic[M]):
    """The messages to send (kept history, then the current run) and what was dropped."""

    messages: list[M]
    dropped: int
    fit: ContextFit


def trim_history(
    counter: RequestCounter,
    system: str,
    history: Sequence[M],
    current: Sequence[M],
    *,
    context_window: int,
    reserved_output_tokens: int,
) -> Trimmed[M]:
    """Drop the oldest ``history`` messages until the request fits (see the module doc).

    ``current`` (the user's request and this run's turns) is always kept whole. The kept history
    starts with a ``user`` message, as providers require: an ``assistant`` message left first
    is dropped too. ``fit.fits`` is ``False`` when even no history is too much.
    """
    available = context_window - reserved_output_tokens
    total = counter.count_request(system, current)
    costs = [counter.count_message(message) for message in history]
    total += sum(costs)
    start = 0
    while start < len(history) and (total > available or history[start].role != "user"):
        total -= costs[start]
        start += 1
    kept = list(history[start:]) + list(current)
    return Trimmed(kept, start, ContextFit(total, context_window, reserved_output_tokens))
