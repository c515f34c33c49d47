"""What one turn did, gathered from its events as they arrive, for the turn-outcome resolver."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.agent.turn_outcome import TurnFacts
from app.agent.web_tools import ToolResult
from parser.events import (
    Command,
    Done,
    Event,
    FileEnd,
    InstallContent,
    SandboxStart,
    Text,
    UrlScrape,
    WebSearch,
)

MAX_COMMAND_OUTPUT_CHARS = 8000  # the tail kept for the model; the UI streams it all

_ACTIONS = (SandboxStart, InstallContent, Command, WebSearch, UrlScrape)


@dataclass
class TurnRecorder:
    """Observes a turn's parser events and sandbox records."""

    turn: int
    files_written: list[str] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)
    done_seen: bool = False
    text_seen: bool = False
    actions_started: bool = False
    edits_refused: bool = False
    _output: list[str] = field(default_factory=list)

    def observe(self, event: Event) -> None:
        """Note what a parser event says about the turn."""
        if isinstance(event, Text):
            self.text_seen = self.text_seen or not event.content.isspace()
        elif isinstance(event, FileEnd):
            if event.path not in self.files_written:
                self.files_written.append(event.path)
        elif isinstance(event, Done):
            self.done_seen = True
        if isinstance(event, _ACTIONS):
            self.actions_started = True

    def edit_refused(self, result: ToolResult) -> None:
        """An edit was refused: the model gets why (and the file) and must redo it."""
        self.edits_refused = True
        self.tool_results.append(result)

    def file_written(self, path: str) -> None:
        """A file was written by other means than its own events (an applied edit)."""
        if path not in self.files_written:
            self.files_written.append(path)

    def command_output(self, line: str) -> None:
        """One line of a running command's output (kept for the model's tool result)."""
        self._output.append(line)

    def command_finished(self, argv: list[str], exit_code: int | None) -> None:
        """A command ended: its output becomes a tool result the model will see."""
        text = "\n".join(self._output)[-MAX_COMMAND_OUTPUT_CHARS:]
        self._output = []
        status = f"exit code {exit_code}" if exit_code is not None else "no exit code"
        result = ToolResult("command", " ".join(argv), exit_code == 0, f"({status})\n{text}")
        self.tool_results.append(result)

    def facts(
        self,
        *,
        max_turns: int,
        budgets_exceeded: tuple[str, ...],
        nudge_used: bool,
        cancelled: bool,
        fatal_error: str | None,
    ) -> TurnFacts:
        """The facts the resolver decides on."""
        return TurnFacts(
            turn=self.turn,
            max_turns=max_turns,
            files_written=tuple(self.files_written),
            tool_results=tuple(self.tool_results),
            done_seen=self.done_seen,
            text_seen=self.text_seen,
            actions_started=self.actions_started,
            budgets_exceeded=budgets_exceeded,
            nudge_used=nudge_used,
            cancelled=cancelled,
            fatal_error=fatal_error,
            edits_refused=self.edits_refused,
        )
