"""``DELETE /api/chats/{id}``: a chat goes with its sandboxes, its project and its history.

A chat with a run in progress (queued or running) is refused with ``409 chat_busy``, in words:
deleting under a worker would race its writes (the sandbox it is acquiring or writing, the
version it is about to record, its events), and cancelling for the user would end work they did
not ask to end. The UI says so and offers Cancel; once the run has ended, the delete goes on.

The order makes a failure retryable: the sandboxes are removed first, then the project, then
the store's rows (chat, messages, runs, events, checkpoints: one cascade). If Docker or the
project store fails, the answer is a 503 and the chat is still listed, so deleting it again
finishes the job; nothing is left that the user can no longer see.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from starlette.requests import Request
from starlette.responses import Response

from app.api.auth import require_user
from app.api.errors import ApiError
from app.api.ownership import owned_chat
from app.api.ports import ChatRow, RunRow
from app.api.services import in_thread, services
from app.projects.errors import ProjectError
from app.projects.sync import ProjectAccess

log = logging.getLogger(__name__)
ACTIVE = frozenset({"queued", "running"})


async def delete_chat(request: Request) -> Response:
    """``DELETE /api/chats/{id}`` -> 204 (409 ``chat_busy`` while a run is in progress)."""
    user = await require_user(request)
    found = services(request)
    chat = await owned_chat(found.store, user.id, request.path_params["chat_id"])
    runs = await in_thread(found.store.list_runs, chat.id)
    if any(run.status in ACTIVE for run in runs):
        raise ApiError(
            409,
            "chat_busy",
            f"chat {chat.title!r} has a run in progress; cancel it (or wait for it to end), "
            "then delete the chat",
        )
    for sandbox_id in sandboxes_of(chat, runs):
        await found.sandboxes.destroy(sandbox_id)
    await delete_project(getattr(request.app.state, "projects", None), chat.id)
    await in_thread(found.store.delete_chat, chat.id)
    return Response(status_code=204)


def sandboxes_of(chat: ChatRow, runs: Sequence[RunRow]) -> list[str]:
    """Every sandbox the chat used: its current one and any a run recorded (a chat may have
    had several, one after another, when one idled out)."""
    found = {run.sandbox_id for run in runs if run.sandbox_id}
    if chat.sandbox_id:
        found.add(chat.sandbox_id)
    return sorted(found)


async def delete_project(projects: ProjectAccess | None, chat_id: str) -> None:
    """Remove the chat's project (a server without projects has none); 503 on failure."""
    if projects is None:
        return
    try:
        await in_thread(projects.store.delete, chat_id)
    except ProjectError as exc:
        log.warning("project of chat %s not removed: %s", chat_id, exc)
        message = "the chat's project could not be removed now; try deleting the chat again"
        raise ApiError(503, "project_unavailable", message) from exc
