"""An element's text edited in place in a chat's sandbox, recorded as a version, no model turn.

The person double-clicked an element of the preview and typed its new text (issue 26, item 3);
:func:`apply_text_edit` does the rest, as a turn would but without a model:

1. the sandbox is brought up to the latest version first (a parked sandbox is revived by the
   manager on its volume; a new one gets the version written: :meth:`ProjectSync.restore_if_stale`);
2. under the chat's turn (:func:`app.projects.sync.chat_turn`: one writer of the workspace at a
   time) the file is read from the workspace, the one text node is found and replaced
   (:func:`app.projects.jsx_text.edited_source`: a search/replace block, as the model's edits are
   applied), and the file is written back (:func:`app.projects.workspace_io.write_workspace`, as
   a restore writes): Vite's watcher sees it and the preview updates by hot module replacement;
3. the workspace is recorded as a version with the note ``Edited text in <file>``
   (:meth:`ProjectSync.record`, as every turn's end is).

A refusal (:class:`app.projects.jsx_text.TextEditRefused`) leaves every file as it was.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio.to_thread

from app.projects.errors import ProjectError
from app.projects.jsx_text import (
    JSX_SUFFIXES,
    TEXT_EDIT_STALE,
    TEXT_EDIT_UNSUPPORTED,
    TextEditRefused,
    edited_source,
)
from app.projects.store import Version, VersionInfo
from app.projects.sync import ProjectAccess, chat_turn
from app.projects.workspace_io import write_workspace

FileReader = Callable[[str, str], Awaitable[str | None]]
"""``(sandbox id, path) -> text``, ``None`` when the workspace holds no such file."""


@dataclass(frozen=True, slots=True)
class TextEdit:
    """The text of the element at ``file:line:column`` changed from ``old_text`` to
    ``new_text``."""

    file: str
    line: int
    column: int
    old_text: str
    new_text: str

    @property
    def note(self) -> str:
        """What the version it makes is called."""
        return f"Edited text in {self.file}"


async def apply_text_edit(
    access: ProjectAccess, read_file: FileReader, chat: str, sandbox_id: str, edit: TextEdit
) -> Version:
    """Apply ``edit`` in ``chat``'s sandbox and record the version it makes (see the module
    docstring); :class:`TextEditRefused` when it cannot be applied as asked."""
    if access.containers is None:
        raise ProjectError(f"no access to the sandbox {sandbox_id!r} of chat {chat!r}")
    sync = access.sync(chat)
    if not edit.file.endswith(JSX_SUFFIXES):
        raise TextEditRefused(
            TEXT_EDIT_UNSUPPORTED,
            f"only text written in JSX can be edited in place, not in {edit.file!r}",
        )
    records: list[tuple[str, Mapping[str, Any]]] = []

    async def note(kind: str, record: Mapping[str, Any]) -> None:
        records.append((kind, record))

    await sync.restore_if_stale(sandbox_id, note)
    async with chat_turn(sync.chat):
        source = await read_file(sandbox_id, edit.file)
        if source is None:
            raise TextEditRefused(TEXT_EDIT_STALE, f"the app has no file {edit.file!r} now")
        if "\ufffd" in source:  # read with replacements: writing it back would lose bytes
            raise TextEditRefused(TEXT_EDIT_UNSUPPORTED, f"{edit.file!r} is not UTF-8 text")
        edited = await anyio.to_thread.run_sync(functools.partial(_edited, source, edit))
        container = await access.containers.container_for(sandbox_id)
        await write_workspace(container, {edit.file: edited.encode()})
    version = await sync.record(sandbox_id, VersionInfo(note=edit.note), note)
    if version is None:
        raise ProjectError(_failure(records, edit))
    return version


def _edited(source: str, edit: TextEdit) -> str:
    return edited_source(
        source, edit.line, edit.column, edit.old_text, edit.new_text, path=edit.file
    )


def _failure(records: list[tuple[str, Mapping[str, Any]]], edit: TextEdit) -> str:
    """Why the edit's version was not recorded, from the sync's records."""
    for kind, record in reversed(records):
        if kind == "error":
            return f"the edit of {edit.file!r} was written but not recorded: {record['message']}"
    return f"the edit of {edit.file!r} changed nothing"
