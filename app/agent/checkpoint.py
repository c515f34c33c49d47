"""A run's state at a turn boundary: enough to resume the loop after a crash.

A checkpoint is plain data (``to_dict``/``from_dict`` round-trip through JSON) so the service can
store it; resuming from one continues with the next turn and ends with the same files as a run
that was never interrupted (the sandbox is rebuilt from ``files`` when it was lost).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.providers.base import Message


@dataclass
class Checkpoint:
    """The loop's state after ``turn`` turns."""

    request: str
    turn: int = 0
    messages: list[Message] = field(default_factory=list)  # this run's conversation so far
    files: dict[str, str] = field(default_factory=dict)  # every file the run wrote, final content
    packages: list[str] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)  # BudgetTracker.to_dict()
    nudge_used: bool = False
    stop_reason: str | None = None  # set once the loop has stopped
    stop_detail: str = ""
    fixup_turns: int = 0
    sandbox_id: str | None = None

    @classmethod
    def start(cls, request: str) -> Checkpoint:
        """The state before the first turn: the request is the first message."""
        return cls(request=request, messages=[Message("user", request)])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "request": self.request,
            "turn": self.turn,
            "messages": [{"role": m.role, "content": m.content} for m in self.messages],
            "files": dict(self.files),
            "packages": list(self.packages),
            "usage": self.usage,
            "nudge_used": self.nudge_used,
            "stop_reason": self.stop_reason,
            "stop_detail": self.stop_detail,
            "fixup_turns": self.fixup_turns,
            "sandbox_id": self.sandbox_id,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Checkpoint:
        """Rebuild a checkpoint from :meth:`to_dict`'s output."""
        fields = dict(data)
        fields["messages"] = [Message(m["role"], m["content"]) for m in data["messages"]]
        return cls(**fields)
