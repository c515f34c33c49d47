"""The events the stream parser emits.

Every event is a slotted value object with a ``type`` discriminator (its JSON name) and
``to_dict()``. They are plain slotted classes, not frozen dataclasses: the parser builds one per
streamed chunk, and ``bench/parser.py`` shows a frozen dataclass costs about twice as much to
construct. They are immutable by convention; nothing in kiln mutates an event after it is made.

JSON shapes (``to_dict()``), as DESIGN.md fixes them::

    text{content}  thinking_start  thinking_content{content}  thinking_end
    sandbox_start{project, base}  sandbox_end
    file_start{path}  file_content{path, content}  file_end{path}
    install_start  install_content{dependencies, framework}  install_end
    command{command, args}  web_search{query, max_results}  url_scrape{url}  done
    edit_start{path}  edit_block{path, search, replace}  edit_end{path}  read{path}
    error{code, message, severity}
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, Literal

Severity = Literal["fatal", "recoverable"]


class Event:
    """Base of all parser events: equality, repr and ``to_dict`` over the slots."""

    __slots__: tuple[str, ...] = ()
    # The fields in order, for the methods below. Not ``self.__slots__``: a class compiled by
    # mypyc (the optional compiled parser, app.parser_choice) has no ``__slots__`` attribute.
    field_names: ClassVar[tuple[str, ...]] = ()
    type: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        """The event as a JSON-ready dict: ``{"type": ..., <fields>}``."""
        out: dict[str, Any] = {"type": self.type}
        for name in self.field_names:
            value = getattr(self, name)
            out[name] = list(value) if isinstance(value, tuple) else value
        return out

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.field_names)

    def __hash__(self) -> int:
        return hash((self.type, *(getattr(self, n) for n in self.field_names)))

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.field_names)
        return f"{self.__class__.__name__}({fields})"


class Text(Event):
    """Prose for the user."""

    field_names = ("content",)
    __slots__ = field_names
    type = "text"

    def __init__(self, content: str) -> None:
        self.content = content


class ThinkingStart(Event):
    """A thinking block opened."""

    __slots__ = ()
    type = "thinking_start"


class ThinkingContent(Event):
    """Part of a thinking block."""

    field_names = ("content",)
    __slots__ = field_names
    type = "thinking_content"

    def __init__(self, content: str) -> None:
        self.content = content


class ThinkingEnd(Event):
    """A thinking block closed."""

    __slots__ = ()
    type = "thinking_end"


class SandboxStart(Event):
    """The model opened its sandbox block (files follow)."""

    field_names = ("base", "project")
    __slots__ = field_names
    type = "sandbox_start"

    def __init__(self, project: str | None, base: str | None) -> None:
        self.project = project
        self.base = base


class SandboxEnd(Event):
    """The sandbox block closed."""

    __slots__ = ()
    type = "sandbox_end"


class FileStart(Event):
    """A file begins; ``path`` is a normalized, safe, relative POSIX path."""

    field_names = ("path",)
    __slots__ = field_names
    type = "file_start"

    def __init__(self, path: str) -> None:
        self.path = path


class FileContent(Event):
    """The next piece of a file's body."""

    field_names = ("content", "path")
    __slots__ = field_names
    type = "file_content"

    def __init__(self, path: str, content: str) -> None:
        self.path = path
        self.content = content


class FileEnd(Event):
    """A file is complete."""

    field_names = ("path",)
    __slots__ = field_names
    type = "file_end"

    def __init__(self, path: str) -> None:
        self.path = path


class InstallStart(Event):
    """An install block opened."""

    __slots__ = ()
    type = "install_start"


class InstallContent(Event):
    """The validated packages (and framework, if named) of an install block."""

    field_names = ("dependencies", "framework")
    __slots__ = field_names
    type = "install_content"

    def __init__(self, dependencies: Iterable[str], framework: str | None) -> None:
        self.dependencies = tuple(dependencies)
        self.framework = framework


class InstallEnd(Event):
    """An install block closed."""

    __slots__ = ()
    type = "install_end"


class Command(Event):
    """A command to run: a program and its argv (never a shell line)."""

    field_names = ("args", "command")
    __slots__ = field_names
    type = "command"

    def __init__(self, command: str, args: Iterable[str]) -> None:
        self.command = command
        self.args = tuple(args)


class WebSearch(Event):
    """A web search the model asked for."""

    field_names = ("max_results", "query")
    __slots__ = field_names
    type = "web_search"

    def __init__(self, query: str, max_results: int) -> None:
        self.query = query
        self.max_results = max_results


class UrlScrape(Event):
    """A page the model asked to read."""

    field_names = ("url",)
    __slots__ = field_names
    type = "url_scrape"

    def __init__(self, url: str) -> None:
        self.url = url


class Done(Event):
    """The model said it is finished."""

    __slots__ = ()
    type = "done"


class EditStart(Event):
    """An edit of an existing file begins: search/replace blocks for ``path`` follow."""

    field_names = ("path",)
    __slots__ = field_names
    type = "edit_start"

    def __init__(self, path: str) -> None:
        self.path = path


class EditBlock(Event):
    """One complete search/replace block: replace the one place ``search`` matches."""

    field_names = ("path", "replace", "search")
    __slots__ = field_names
    type = "edit_block"

    def __init__(self, path: str, search: str, replace: str) -> None:
        self.path = path
        self.search = search
        self.replace = replace


class EditEnd(Event):
    """The edit of ``path`` is complete (every block of it has been emitted)."""

    field_names = ("path",)
    __slots__ = field_names
    type = "edit_end"

    def __init__(self, path: str) -> None:
        self.path = path


class Read(Event):
    """The model asked to see a project file's current content."""

    field_names = ("path",)
    __slots__ = field_names
    type = "read"

    def __init__(self, path: str) -> None:
        self.path = path


class Error(Event):
    """Something in the stream was refused or malformed; ``code`` is stable, ``message`` human."""

    field_names = ("code", "message", "severity")
    __slots__ = field_names
    type = "error"

    def __init__(self, code: str, message: str, severity: Severity = "recoverable") -> None:
        self.code = code
        self.message = message
        self.severity = severity


EVENT_TYPES: dict[str, type[Event]] = {
    cls.type: cls
    for cls in (
        Text,
        ThinkingStart,
        ThinkingContent,
        ThinkingEnd,
        SandboxStart,
        SandboxEnd,
        FileStart,
        FileContent,
        FileEnd,
        InstallStart,
        InstallContent,
        InstallEnd,
        Command,
        WebSearch,
        UrlScrape,
        Done,
        EditStart,
        EditBlock,
        EditEnd,
        Read,
        Error,
    )
}


def merge_adjacent(events: Iterable[Event]) -> list[Event]:
    """Join runs of ``text``, ``thinking_content`` and same-file ``file_content`` events.

    Chunk boundaries decide where the parser splits content; merging removes that freedom, so
    two parses of the same text compare equal however the text was chunked.
    """
    merged: list[Event] = []
    parts: list[str] = []
    for event in events:
        last = merged[-1] if merged else None
        if (
            last is not None
            and event.__class__ is last.__class__
            and isinstance(event, Text | ThinkingContent | FileContent)
            and (not isinstance(event, FileContent) or event.path == last.path)  # type: ignore[attr-defined]
        ):
            parts.append(event.content)
            continue
        _close_run(merged, parts)
        merged.append(event)
        parts = [event.content] if isinstance(event, Text | ThinkingContent | FileContent) else []
    _close_run(merged, parts)
    return merged


def _close_run(merged: list[Event], parts: list[str]) -> None:
    if len(parts) > 1:
        last = merged[-1]
        joined = "".join(parts)
        if isinstance(last, FileContent):
            merged[-1] = FileContent(last.path, joined)
        elif isinstance(last, ThinkingContent):
            merged[-1] = ThinkingContent(joined)
        else:
            merged[-1] = Text(joined)
