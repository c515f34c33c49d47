"""What the render check found, passed on (issue 23): one ``preview_error`` run event per
finding, and the current content of the files the first findings name, for the fix-up prompt
(:func:`prompts.compose.fixup_prompt` shows them whole, so at most :data:`MAX_FILES`)."""

from __future__ import annotations

from app.agent.turn_events import Emit
from app.postgen.pipeline import EventTarget
from sandbox import RenderReport

MAX_FILES = 5


async def publish_render_findings(
    render: RenderReport | None, emit: Emit, target: EventTarget
) -> dict[str, str]:
    """Emit each finding of ``render`` as a ``preview_error``; the files they name, as
    ``target`` holds them now (``{}`` without a report)."""
    files: dict[str, str] = {}
    for error in render.findings if render is not None else []:
        await emit({"type": "preview_error", **error.to_dict()})
        path = error.source.file if error.source else None
        if path and path not in files and len(files) < MAX_FILES:
            content = await target.read_file(path)
            if content is not None:
                files[path] = content
    return files
