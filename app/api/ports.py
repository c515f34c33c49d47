"""What the HTTP API needs from the rest of the service, as structural types.

The API depends on these shapes, not on classes: ``app.store.Store``, ``app.runs.RunService``
and ``sandbox.lifecycle.manager.SandboxManager`` satisfy them, and tests can pass small fakes. Each
method's meaning is the one documented in ``docs/service-contract.md``.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from app.chat_images import ChatImage
from app.store.app_env import AppVariable
from sandbox import Sandbox, WorkspaceFile


class UserRow(Protocol):
    """A user as the store returns it."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...


class ChatRow(Protocol):
    """A chat as the store returns it."""

    @property
    def id(self) -> str: ...

    @property
    def user_id(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def created(self) -> float: ...

    @property
    def sandbox_id(self) -> str | None: ...


class ImageRow(Protocol):
    """An image as a message lists it."""

    @property
    def id(self) -> str: ...

    @property
    def media_type(self) -> str: ...

    @property
    def size(self) -> int: ...


class MessageRow(Protocol):
    """A chat message as the store returns it."""

    @property
    def id(self) -> str: ...

    @property
    def role(self) -> str: ...

    @property
    def content(self) -> str: ...

    @property
    def data(self) -> dict[str, Any] | None: ...

    @property
    def created(self) -> float: ...

    @property
    def images(self) -> Sequence[ImageRow]: ...


class RunRow(Protocol):
    """A run as the store returns it (fields of the contract's run table)."""

    @property
    def id(self) -> str: ...

    @property
    def chat_id(self) -> str: ...

    @property
    def user_id(self) -> str: ...

    @property
    def status(self) -> str: ...

    @property
    def stop_reason(self) -> str | None: ...

    @property
    def turns(self) -> int: ...

    @property
    def usage(self) -> dict[str, Any]: ...

    @property
    def sandbox_id(self) -> str | None: ...

    @property
    def preview_url(self) -> str | None: ...

    @property
    def error(self) -> Any: ...

    @property
    def created(self) -> float: ...

    @property
    def started(self) -> float | None: ...

    @property
    def finished(self) -> float | None: ...


class RemoteRow(Protocol):
    """A chat's git remote as the store gives it (app.store.remotes.ChatRemote)."""

    @property
    def url(self) -> str: ...

    @property
    def branch(self) -> str: ...

    @property
    def token(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


class StorePort(Protocol):
    """The store's methods the API calls (synchronous: called in worker threads)."""

    def get_user(self, user_id: str) -> UserRow | None: ...

    def create_token(self, user_id: str, kind: str = "api", ttl: float | None = None) -> str: ...

    def user_for_token(self, token: str, kind: str) -> UserRow | None: ...

    def consume_login_token(self, token: str) -> UserRow | None: ...

    def revoke_token(self, token: str, kind: str) -> bool: ...

    def revoke_sessions(self, user_id: str) -> int: ...

    def set_provider_key(self, user_id: str, provider: str, key: str) -> None: ...

    def provider_keys(self, user_id: str) -> dict[str, str]: ...

    def provider_key_names(self, user_id: str) -> Sequence[str]: ...

    def delete_provider_key(self, user_id: str, provider: str) -> bool: ...

    def create_chat(self, user_id: str, title: str) -> ChatRow: ...

    def rename_chat(self, chat_id: str, title: str) -> ChatRow | None: ...

    def delete_chat(self, chat_id: str) -> bool: ...

    def list_chats(self, user_id: str) -> Sequence[ChatRow]: ...

    def get_chat(self, chat_id: str) -> ChatRow | None: ...

    def list_messages(self, chat_id: str) -> Sequence[MessageRow]: ...

    def chat_image(self, chat_id: str, image_id: str) -> ChatImage | None: ...

    def list_runs(self, chat_id: str) -> Sequence[RunRow]: ...

    def get_run(self, run_id: str) -> RunRow | None: ...

    def set_chat_sandbox(self, chat_id: str, sandbox_id: str | None) -> None: ...

    # A chat's git remote (app/api/remotes.py); ``chat_remote``'s token is decrypted.
    def set_chat_remote(self, chat_id: str, url: str, branch: str, token: str | None) -> None: ...

    def chat_remote(self, chat_id: str) -> RemoteRow | None: ...

    def delete_chat_remote(self, chat_id: str) -> bool: ...

    def record_push(self, chat_id: str, result: dict[str, Any]) -> None: ...

    def app_variables(self, chat_id: str) -> list[AppVariable]: ...

    def set_app_variable(self, chat_id: str, variable: AppVariable) -> AppVariable: ...

    def delete_app_variable(self, chat_id: str, name: str) -> bool: ...


class RunServicePort(Protocol):
    """Admission, queueing, cancelling and following runs (``app.runs.service.RunService``)."""

    async def submit(
        self,
        user_id: str,
        chat_id: str,
        content: str,
        provider: str | None = None,
        model: str | None = None,
        template: str | None = None,
        images: Sequence[ChatImage] = (),
    ) -> tuple[str, str]: ...

    async def start_chat(
        self,
        user_id: str,
        title: str,
        content: str,
        provider: str | None = None,
        model: str | None = None,
        template: str | None = None,
        images: Sequence[ChatImage] = (),
    ) -> tuple[ChatRow, str, str]: ...

    async def cancel(self, user_id: str, run_id: str) -> RunRow: ...

    def follow(
        self, run_id: str, after_seq: int = 0
    ) -> AbstractAsyncContextManager[AsyncIterable[tuple[int, dict[str, Any]]]]: ...


class SandboxesPort(Protocol):
    """The sandbox manager's methods the API calls."""

    async def get(self, sandbox_id: str) -> Sandbox: ...

    async def destroy(self, sandbox_id: str) -> None: ...

    # For app.projects (versions); the API's own handlers never call Docker.
    async def container_for(self, sandbox_id: str) -> Any: ...

    async def list_files(self, sandbox_id: str) -> Sequence[WorkspaceFile]: ...

    async def read_file(self, sandbox_id: str, path: str) -> str | None: ...

    async def apply_app_env(self, sandbox_id: str) -> bool: ...
