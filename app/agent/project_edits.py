"""What a run knows of the project it changes: one copy of its files, and its edits' fates.

A message to a chat whose project has files is an edit (:meth:`ProjectEdits.select`): the model
is shown the project's map and the files most likely concerned (:mod:`app.agent.context`). As
the run goes on, :attr:`ProjectEdits.files` follows it: an applied edit or an accepted whole-file
rewrite replaces a file's content there, a refused rewrite leaves the previous content
(:mod:`app.agent.rewrite_guard`). A refused edit goes back to the model with the file's content
it was tried on; after :data:`app.agent.edit_feedback.EDIT_ATTEMPTS` refusals for one file, the
model is asked for the whole file. A generating run has no project: :meth:`ProjectEdits.none`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import anyio

from app.agent.context import ContextSelection, ExistingProject, select_context
from app.agent.edit_feedback import refused_edit_result
from app.agent.rewrite_guard import refused_rewrite
from app.agent.web_tools import ToolResult
from prompts.compose import EnvName, Mode, system_prompt
from sandbox import FailedEdit, get_template

CONTEXT_BUDGET_TOKENS = 20_000  # an edit turn's file map and file contents, at most...
CONTEXT_WINDOW_SHARE = 4  # ...and at most this fraction of the model's context window


class ProjectEdits:
    """The files of the project a run edits, as the run left them so far (one copy), the
    context the model is shown, and how often each file's edits were refused."""

    def __init__(self, files: dict[str, str], context: ContextSelection | None) -> None:
        """Start from the project's ``files``; ``context`` is what the model is shown."""
        self.files = files
        self.context = context
        self._refusals: dict[str, int] = {}

    @classmethod
    def none(cls) -> ProjectEdits:
        """A run that generates: no project yet (edits may still change what it writes)."""
        return cls({}, None)

    @classmethod
    async def select(
        cls,
        project: ExistingProject,
        request: str,
        *,
        selected: tuple[str, ...] = (),
        context_window: int,
        count_tokens: Callable[[str], int],
    ) -> ProjectEdits:
        """The edit of ``project`` that ``request`` asks for, with the files most likely
        concerned chosen within the budget (in a thread: scanning a few hundred files'
        imports takes most of a second); ``selected`` are the files of the elements selected
        in the preview, shown first."""
        select = functools.partial(
            select_context,
            project.files,
            request,
            template=project.template,
            entrypoints=get_template(project.template).entrypoints,
            recent=project.recent,
            selected=selected,
            budget_tokens=min(CONTEXT_BUDGET_TOKENS, context_window // CONTEXT_WINDOW_SHARE),
            count_tokens=count_tokens,
        )
        context = await anyio.to_thread.run_sync(select)
        return cls(dict(project.files), context)

    def system_prompt(self, template: str, mode: Mode, app_env: Sequence[EnvName] = ()) -> str:
        """The system prompt of ``mode``, with the project's map and files in an edit and the
        names of the app's environment variables."""
        if self.context is None:
            return system_prompt(template, mode, app_env=app_env)
        return system_prompt(
            template,
            mode,
            existing_files=self.context.contents,
            file_map=self.context.file_map,
            app_env=app_env,
        )

    def applied(self, path: str, content: str) -> None:
        """An edit of ``path`` was applied: ``content`` is the file now."""
        if path in self.files:
            self.files[path] = content

    def refused(self, failed: FailedEdit) -> ToolResult:
        """An edit was refused: what the model is told (the file's content it was tried on;
        the whole file asked for after repeated refusals)."""
        count = self._refusals.get(failed.path, 0) + 1
        self._refusals[failed.path] = count
        return refused_edit_result(failed, count)

    def rewrite_refusal(self, path: str, new: str) -> str | None:
        """Why the whole-file rewrite of an existing ``path`` to ``new`` is refused (its
        previous content stays in :attr:`files`), or ``None``: ``new`` is the file now."""
        old = self.files.get(path)
        if old is None:
            return None
        reason = refused_rewrite(path, old, new)
        if reason is None:
            self.files[path] = new
        return reason
