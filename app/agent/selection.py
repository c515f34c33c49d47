"""Elements a person selected in the preview (issue 26): what a message's ``selection`` holds,
and how the user turn names them.

The preview's select mode reads each element's source location from the dev server's
``data-kiln-source`` attribute; the API checks it against the project (app/api/selection_field.py)
and keeps it with the message, with the source line it points at. The user turn then says which
elements the person means, by file, line and that line's text, so "make this bigger" needs no
guessing; context selection shows those files first (:mod:`app.agent.context`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MAX_ELEMENTS = 8  # selections one message carries, at most
MAX_TEXT = 300  # characters of an element's text excerpt
MAX_TAG = 64
MAX_COMPONENT = 100
MAX_PATH = 300
MAX_SOURCE_LINE = 300  # characters of the source line kept with a selection


@dataclass(frozen=True, slots=True)
class SelectedElement:
    """One selected element: where its JSX starts (1-based line and column) and what it shows."""

    file: str
    line: int
    column: int
    tag: str
    text: str
    component: str | None = None
    source_line: str = ""  # the file's text at ``line`` when the message was sent

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (as kept in the message's data)."""
        found: dict[str, Any] = {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "tag": self.tag,
            "text": self.text,
        }
        if self.component:
            found["component"] = self.component
        if self.source_line:
            found["source_line"] = self.source_line
        return found

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SelectedElement:
        """The element kept as :meth:`to_dict` made it."""
        return cls(
            str(data["file"]),
            int(data["line"]),
            int(data["column"]),
            str(data.get("tag", "")),
            str(data.get("text", "")),
            str(data["component"]) if data.get("component") else None,
            str(data.get("source_line", "")),
        )


def selection_of(data: Mapping[str, Any] | None) -> tuple[SelectedElement, ...]:
    """The selection a message's ``data`` keeps (none for older messages)."""
    kept = (data or {}).get("selection") or []
    return tuple(SelectedElement.from_dict(item) for item in kept if isinstance(item, dict))


def describe(element: SelectedElement) -> str:
    """One line naming ``element`` for the model."""
    where = f"{element.file} line {element.line}, column {element.column}"
    owner = f" in component {element.component}" if element.component else ""
    shown = f' showing "{element.text}"' if element.text else ""
    line = f"\n   The line reads: {element.source_line.strip()}" if element.source_line else ""
    return f"<{element.tag}>{shown}{owner}, at {where}.{line}"


def user_turn(content: str, selection: Sequence[SelectedElement]) -> str:
    """The user's message as the model reads it: the text, then the elements it is about."""
    if not selection:
        return content
    numbered = "\n".join(f"{n}. {describe(element)}" for n, element in enumerate(selection, 1))
    intro = (
        "The person selected this element in the preview; by 'this' they mean it:"
        if len(selection) == 1
        else "The person selected these elements in the preview; by 'this' or 'these' they mean"
        " them:"
    )
    closing = "Change only what the request asks for, at those places."
    return f"{content}\n\n{intro}\n{numbered}\n{closing}"
