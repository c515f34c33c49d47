"""A session's edit path: ``edit_start``/``edit_block``/``edit_end`` become a whole new file.

Blocks are collected per file and applied, all or none, when its edit ends
(:func:`sandbox.writes.edit_blocks.apply_edit_blocks`); the session then writes the new content
through the write buffer as a whole file, like any file (the write path stays idempotent). A
refused edit (no such file, a block matching nowhere or several places) is logged with the
content it was tried on and reported as an error record: the agent loop tells the model.
"""

from __future__ import annotations

from parser.events import EditBlock, EditEnd, EditStart
from sandbox.session_log import AppliedEdit, FailedEdit, SessionReporter
from sandbox.writes.edit_blocks import EDIT_NO_MATCH, apply_edit_blocks

Blocks = list[tuple[str, str]]  # (search, replace), in the order the answer gave them


class EditPath:
    """The edits of one session, from their blocks to the file's new content."""

    def __init__(self, reporter: SessionReporter) -> None:
        """Log and report through ``reporter``."""
        self.reporter = reporter
        self._open: dict[str, Blocks] = {}  # blocks of the edits begun and not yet ended

    def collect(self, event: EditStart | EditBlock) -> None:
        """Keep a block (an ``edit_start`` drops the blocks of an earlier edit of its file)."""
        if isinstance(event, EditStart):
            self._open[event.path] = []
        else:
            self._open.setdefault(event.path, []).append((event.search, event.replace))

    def end(self, event: EditEnd) -> Blocks:
        """The blocks of the edit that ended (none: nothing to apply)."""
        return self._open.pop(event.path, [])

    async def apply(
        self, path: str, blocks: Blocks, current: str | None
    ) -> AppliedEdit | FailedEdit:
        """``current`` with ``blocks`` applied, or why not (a refusal is logged and reported)."""
        if current is None:
            message = f"{path!r} does not exist, so it cannot be edited; write it whole with <file>"
            return await self._refuse(FailedEdit(path, EDIT_NO_MATCH, message, None))
        result = apply_edit_blocks(path, current, blocks)
        if result.content is None:
            return await self._refuse(FailedEdit(path, result.code, result.message, current))
        return AppliedEdit(path, result.content)

    async def applied(self, edit: AppliedEdit, blocks: Blocks) -> None:
        """The edit's new content was written whole."""
        self.reporter.log.applied_edits.append((edit.path, edit.content))
        await self.reporter.record("edit", {"path": edit.path, "blocks": len(blocks)})

    def abandon(self) -> None:
        """A cancelled run: blocks of an edit that never ended are never applied."""
        self._open.clear()

    async def _refuse(self, failed: FailedEdit) -> FailedEdit:
        self.reporter.log.failed_edits.append(failed)
        await self.reporter.error(failed.code, failed.message, path=failed.path)
        return failed
