"""Fold a stream's events into what it amounts to: files, packages, commands, searches, errors.

Pure and sans-IO like the rest of ``parser``: it only remembers. ``kiln parse`` uses it for its
summary and ``--materialize``; the runtime can use it to know what a turn produced. Events may
come from several turns: a file written again is replaced (``file_start`` resets it), so
``files`` holds each path's final content.

File content is kept as a list of pieces and joined once, at ``file_end`` or when ``files`` is
read, so assembling a file streamed in many small pieces stays linear.
"""

from __future__ import annotations

from collections.abc import Iterable

from parser.events import (
    Command,
    Done,
    Error,
    Event,
    FileContent,
    FileEnd,
    FileStart,
    InstallContent,
    UrlScrape,
    WebSearch,
)


class FileAssembler:
    """Accumulates events; read ``files``, ``packages``, ``commands``, ``searches``, ``errors``."""

    def __init__(self) -> None:
        self._pieces: dict[str, list[str]] = {}
        self._open: set[str] = set()
        self.packages: list[str] = []
        self.framework: str | None = None
        self.commands: list[Command] = []
        self.searches: list[WebSearch] = []
        self.scrapes: list[UrlScrape] = []
        self.errors: list[Error] = []
        self.done = False
        self.event_count = 0

    def apply(self, event: Event) -> None:
        """Take one event into account."""
        self.event_count += 1
        if isinstance(event, FileContent):
            self._pieces.setdefault(event.path, []).append(event.content)
        elif isinstance(event, FileStart):
            self._pieces[event.path] = []
            self._open.add(event.path)
        elif isinstance(event, FileEnd):
            self._join(event.path)
            self._open.discard(event.path)
        else:
            self._apply_other(event)

    def _apply_other(self, event: Event) -> None:
        if isinstance(event, InstallContent):
            self.packages.extend(p for p in event.dependencies if p not in self.packages)
            self.framework = event.framework or self.framework
        elif isinstance(event, Command):
            self.commands.append(event)
        elif isinstance(event, WebSearch):
            self.searches.append(event)
        elif isinstance(event, UrlScrape):
            self.scrapes.append(event)
        elif isinstance(event, Error):
            self.errors.append(event)
        elif isinstance(event, Done):
            self.done = True

    def put(self, path: str, content: str) -> None:
        """A whole file known at once (an applied edit, a file restored): as if it had been
        streamed between a ``file_start`` and a ``file_end``."""
        self._pieces[path] = [content]
        self._open.discard(path)

    def apply_all(self, events: Iterable[Event]) -> None:
        """Take every event of ``events`` into account, in order."""
        for event in events:
            self.apply(event)

    @property
    def files(self) -> dict[str, str]:
        """Each file's content so far, by path, in the order the files were first started."""
        return {path: self._join(path) for path in self._pieces}

    @property
    def open_files(self) -> list[str]:
        """Paths whose ``file_end`` has not arrived (yet)."""
        return [path for path in self._pieces if path in self._open]

    def _join(self, path: str) -> str:
        pieces = self._pieces.get(path)
        if pieces is None:
            return ""
        if len(pieces) != 1:
            # keep the joined text as the single piece, so reading twice costs nothing extra
            pieces[:] = ["".join(pieces)]
        return pieces[0]
