"""Editing an element's text in place: ``POST /api/chats/{id}/text-edits``, no model turn.

The body is what the preview's selector reports of a double-clicked element whose text the
person changed: ``{file, line, column, old_text, new_text}`` (``line`` from 1, ``column`` of the
element's ``<`` from 0, as in ``data-kiln-source``). The answer is ``201 {version, file,
sandbox_id}``: the file changed at that element's text, and the version recorded ("Edited text
in src/App.jsx", :mod:`app.projects.text_edit`). No provider is called and no run is made.

Refused, with nothing changed: another user's chat (404); a run of the chat queued or running
(409 ``run_active``, as a restore is: one writer of the sandbox at a time); a chat without a
sandbox (409 ``text_edit_no_sandbox``: a message brings the app back); text that is not one
plain JSX text node at that place (409 with the locator's code: ``text_edit_expression``,
``text_edit_ambiguous``, ``text_edit_stale``, ``text_edit_unsupported``). The web UI then puts
the selection and the new text into the composer as a suggested message.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.api.auth import require_user
from app.api.bodies import (
    invalid_field,
    read_object,
    reject_unknown,
    required_int,
    required_text,
)
from app.api.errors import ApiError
from app.api.ownership import owned_chat
from app.api.services import services
from app.api.versions import access, live_sandbox, project_failure, refuse_while_running
from app.projects.errors import ProjectError
from app.projects.jsx_text import TextEditRefused
from app.projects.rules import safe_path
from app.projects.text_edit import TextEdit, apply_text_edit
from sandbox import FileTooLarge, SandboxError

FIELDS = frozenset({"file", "line", "column", "old_text", "new_text"})
MAX_PATH_LENGTH = 500
MAX_TEXT_LENGTH = 5_000  # an element's text typed in place: a heading, a paragraph
MAX_LINE = 1_000_000
NO_SANDBOX = "text_edit_no_sandbox"


def read_text_edit(fields: dict[str, Any]) -> TextEdit:
    """The body's edit, checked (422 naming the field)."""
    reject_unknown(fields, FIELDS)
    file = required_text(fields, "file", MAX_PATH_LENGTH)
    if safe_path(file) != file:
        raise invalid_field("file", f"must be a path inside the project, not {file!r}")
    old_text = required_text(fields, "old_text", MAX_TEXT_LENGTH)
    new_text = required_text(fields, "new_text", MAX_TEXT_LENGTH)
    if " ".join(old_text.split()) == " ".join(new_text.split()):
        raise invalid_field("new_text", "is the text the element has already")
    line = required_int(fields, "line", 1, MAX_LINE)
    column = required_int(fields, "column", 0, MAX_LINE)
    return TextEdit(file, line, column, old_text, new_text)


async def post_text_edit(request: Request) -> Response:
    """``POST /api/chats/{id}/text-edits {file, line, column, old_text, new_text}`` -> 201."""
    user = await require_user(request)
    found = services(request)
    chat = await owned_chat(found.store, user.id, request.path_params["chat_id"])
    edit = read_text_edit(await read_object(request))
    given = access(request)
    await refuse_while_running(found.store, chat.id)
    sandbox_id = await live_sandbox(request, chat.sandbox_id)
    if sandbox_id is None:
        message = f"chat {chat.id!r} has no app running now: send a message to bring it back"
        raise ApiError(409, NO_SANDBOX, message)
    try:
        version = await apply_text_edit(given, found.sandboxes.read_file, chat.id, sandbox_id, edit)
    except TextEditRefused as exc:
        raise ApiError(409, exc.code, str(exc)) from exc
    except FileTooLarge as exc:
        raise ApiError(413, exc.code, str(exc)) from exc
    except (ProjectError, SandboxError) as exc:
        raise project_failure(exc) from exc
    body = {"version": version.to_dict(), "file": edit.file, "sandbox_id": sandbox_id}
    return JSONResponse(body, 201)


ROUTES = [
    Route("/api/chats/{chat_id}/text-edits", post_text_edit, methods=["POST"]),
]
