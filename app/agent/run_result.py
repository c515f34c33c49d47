"""What a run is given (:class:`RunSettings`) and what it comes to (:class:`RunResult`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.agent.budgets import Budgets
from app.agent.turn_outcome import StopReason
from prompts.compose import EnvName, Mode

_FAILED = {StopReason.ERROR, StopReason.CONTEXT_LIMIT_EXCEEDED, StopReason.NO_OUTPUT}


@dataclass(frozen=True)
class RunSettings:
    """What one run uses: model, template, limits."""

    model: str
    template: str
    provider_name: str
    context_window: int
    budgets: Budgets = field(default_factory=Budgets)
    mode: Mode = Mode.GENERATE
    max_output_tokens: int = 8192
    # files of the elements the person selected in the preview (shown first in an edit)
    selected_files: tuple[str, ...] = ()
    # The chat's app environment as the model is told of it: names and kinds, no values.
    app_env: tuple[EnvName, ...] = ()


@dataclass
class RunResult:
    """The outcome of a run, as ``kiln run --json`` prints it."""

    status: str  # completed | failed | cancelled
    stop_reason: str
    turns: int
    files: list[str]
    packages: list[str]
    commands: list[dict[str, Any]]
    build: dict[str, Any] | None
    postgen: dict[str, Any] | None
    sandbox_id: str | None
    dev_url: str | None
    usage: dict[str, Any]
    errors: list[dict[str, Any]]
    # the run recorded no new version, only versions that changed nothing: its answer wrote
    # the same files again (a replayed demo answer does)
    unchanged: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dict(self.__dict__)


def run_status(reason: StopReason, postgen_ok: bool | None) -> str:
    """``cancelled``, ``failed`` (the loop's stop, or post-generation's findings, say so) or
    ``completed``; ``postgen_ok`` is ``None`` when post-generation did not run."""
    if reason is StopReason.CANCELLED:
        return "cancelled"
    if reason in _FAILED or postgen_ok is False:
        return "failed"
    return "completed"
