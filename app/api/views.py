"""The JSON shapes of chats, messages and runs (``docs/service-contract.md``, HTTP API).

Only the listed fields leave the server: a run's ``user_id``, ``message_id`` and ``worker`` are
internal, and so is a chat's ``user_id``.
"""

from __future__ import annotations

from typing import Any

from app.api.ports import ChatRow, MessageRow, RunRow


def chat_view(chat: ChatRow) -> dict[str, Any]:
    """``{id, title, created, sandbox_id}``."""
    return {
        "id": chat.id,
        "title": chat.title,
        "created": chat.created,
        "sandbox_id": chat.sandbox_id,
    }


def message_view(message: MessageRow) -> dict[str, Any]:
    """``{id, role, content, data, created, images: [{id, media_type, size}]}``."""
    return {
        "id": message.id,
        "role": message.role,
        "content": message.content,
        "data": message.data,
        "created": message.created,
        "images": [
            {"id": image.id, "media_type": image.media_type, "size": image.size}
            for image in message.images
        ],
    }


def run_view(run: RunRow) -> dict[str, Any]:
    """``{id, chat_id, status, stop_reason, turns, usage, sandbox_id, preview_url, error,
    created, started, finished}``."""
    return {
        "id": run.id,
        "chat_id": run.chat_id,
        "status": run.status,
        "stop_reason": run.stop_reason,
        "turns": run.turns,
        "usage": run.usage,
        "sandbox_id": run.sandbox_id,
        "preview_url": run.preview_url,
        "error": run.error,
        "created": run.created,
        "started": run.started,
        "finished": run.finished,
    }
