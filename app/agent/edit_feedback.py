"""What the model is told about its edits and reads: tool results for the next turn.

A refused edit (its blocks matched nowhere or several places, or the file does not exist) comes
back with the reason, what to do, and the file's current content, so the next attempt is made
against the truth. After :data:`EDIT_ATTEMPTS` refusals for one file the model is asked for the
whole file instead: blocks that failed twice are unlikely to succeed a third time.
"""

from __future__ import annotations

from typing import Protocol

from app.agent.web_tools import ToolResult

EDIT_ATTEMPTS = 2


class RefusedEdit(Protocol):
    """A refused edit as the sandbox session logs it (``sandbox.session_log.FailedEdit`` fits)."""

    @property
    def path(self) -> str:
        """The file the edit was for."""

    @property
    def message(self) -> str:
        """Why it was refused."""

    @property
    def content(self) -> str | None:
        """The file's content it was tried on (``None``: no such file)."""


def refused_edit_result(refused: RefusedEdit, attempts: int) -> ToolResult:
    """The tool result of the ``attempts``-th refused edit of ``refused.path``."""
    path = refused.path
    if refused.content is None:
        advice = f"Write {path!r} completely with <file path={path!r}>."
    elif attempts >= EDIT_ATTEMPTS:
        advice = (
            f"Edits of {path!r} were refused {attempts} times: write the whole file with"
            f" <file path={path!r}> instead, keeping everything the request does not change."
        )
    else:
        advice = f"Send corrected SEARCH/REPLACE blocks for {path!r}, copied from this content."
    text = f"{refused.message}\n{advice}"
    if refused.content is not None:
        text += f"\nCurrent content of {path!r}:\n{refused.content}"
    return ToolResult("edit", path, False, text)


def read_result(path: str, content: str | None) -> ToolResult:
    """The tool result of ``<edward_read path=...>``."""
    if content is None:
        return ToolResult("read", path, False, f"there is no file {path!r} in the project")
    return ToolResult("read", path, True, content)
