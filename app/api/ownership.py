"""Who owns what: a user reaches only their own chats, runs and sandboxes; the rest is 404.

A sandbox belongs to the user who owns the chat it serves. Both records are consulted: the
sandbox registry's ``chat`` (set when the worker acquires the sandbox, so it holds during the
first run) and the store's ``chat.sandbox_id`` (set by the worker for the chat). Ownership is
decided from the store's chat rows only; the registry merely points at a chat.
"""

from __future__ import annotations

from app.api.errors import not_found
from app.api.ports import ChatRow, RunRow, SandboxesPort, StorePort
from app.api.services import in_thread
from sandbox import Sandbox, SandboxNotFound


async def owned_chat(store: StorePort, user_id: str, chat_id: str) -> ChatRow:
    """The chat ``chat_id`` if ``user_id`` owns it; 404 otherwise (absent or not theirs)."""
    chat = await in_thread(store.get_chat, chat_id)
    if chat is None or chat.user_id != user_id:
        raise not_found("chat", chat_id)
    return chat


async def owned_run(store: StorePort, user_id: str, run_id: str) -> RunRow:
    """The run ``run_id`` if ``user_id`` owns it; 404 otherwise."""
    run = await in_thread(store.get_run, run_id)
    if run is None or run.user_id != user_id:
        raise not_found("run", run_id)
    return run


async def find_owned_sandbox(
    store: StorePort, sandboxes: SandboxesPort, user_id: str, sandbox_id: str
) -> Sandbox | None:
    """The sandbox ``sandbox_id`` if it serves one of ``user_id``'s chats, else ``None``."""
    try:
        sandbox = await sandboxes.get(sandbox_id)
    except SandboxNotFound:
        return None
    if sandbox.chat:
        chat = await in_thread(store.get_chat, sandbox.chat)
        if chat is not None and chat.user_id == user_id:
            return sandbox
    chats = await in_thread(store.list_chats, user_id)
    return sandbox if any(chat.sandbox_id == sandbox_id for chat in chats) else None


async def owned_sandbox(
    store: StorePort, sandboxes: SandboxesPort, user_id: str, sandbox_id: str
) -> Sandbox:
    """The sandbox ``sandbox_id`` if ``user_id`` owns it; 404 otherwise."""
    sandbox = await find_owned_sandbox(store, sandboxes, user_id, sandbox_id)
    if sandbox is None:
        raise not_found("sandbox", sandbox_id)
    return sandbox
