"""The runs machinery as the HTTP API sees it: submit, cancel, read, follow.

:meth:`RunService.submit` is step 1 of DESIGN.md's flow, ordered so that nothing is ever half
created:

1. check the request (the chat is the user's, the content is not empty, the template exists,
   the provider and model can be used with the user's keys): nothing is written yet;
2. take an admission slot for a fresh run id (atomic in Redis; :class:`AdmissionRefused` here
   leaves no trace but the request counted by the rate limit);
3. write the user's message and the ``queued`` run in one store transaction; if that fails,
   the slot is released;
4. add the run to the queue; if that fails, the run is ended ``failed`` (so it never waits for
   a worker that will not come) and the slot released.

Ownership is enforced here too: a run or chat of another user is :class:`RunNotFound`, exactly
like one that does not exist.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

import anyio
import redis.asyncio

from app.agent.selection import SelectedElement
from app.chat_images import ChatImage
from app.config import ServiceSettings
from app.providers import refuse_unread_images, resolve_provider
from app.runs.admission import Admission
from app.runs.cancel import request_cancel
from app.runs.ending import end_run
from app.runs.errors import InvalidRunRequest, QueueUnavailable, RunNotFound
from app.runs.follow import RunFollower
from app.runs.live import LiveEvents
from app.runs.queue import RunQueue
from app.store import FAILED, QUEUED, Chat, Run, Store, new_id
from sandbox import DEFAULT_TEMPLATE, TEMPLATES, HostCapacity, SandboxSettings

MAX_CONTENT_CHARS = 100_000


@dataclass(frozen=True)
class _Request:
    """One message to admit: who sends what to which chat, with which model."""

    user_id: str
    chat_id: str
    content: str
    provider: str | None
    model: str | None
    template: str | None
    images: tuple[ChatImage, ...] = ()
    selection: tuple[SelectedElement, ...] = ()


class RunService:
    """Submits, cancels and follows runs on behalf of authenticated users."""

    def __init__(
        self,
        store: Store,
        client: redis.asyncio.Redis,
        settings: ServiceSettings,
        *,
        env: Mapping[str, str] | None = None,
        live: LiveEvents | None = None,
        sandboxes: SandboxSettings | None = None,
        room: Callable[[], Awaitable[HostCapacity]] | None = None,
    ) -> None:
        """``env`` supplies the operator's provider keys (default: the process environment);
        ``live`` is the process's one pub/sub fan-out for followers (see :mod:`app.runs.live`);
        ``sandboxes`` are the sandbox manager's settings admission counts against (from the
        environment unless given), ``room`` the memory where sandboxes live (the manager's
        ``memory_room``; this host's unless given)."""
        self._store, self._redis, self._settings = store, client, settings
        self._live = live
        self._env = os.environ if env is None else env
        self.admission = Admission(client, settings, sandboxes, room)
        self.queue = RunQueue(client)

    async def submit(
        self,
        user_id: str,
        chat_id: str,
        content: str,
        provider: str | None = None,
        model: str | None = None,
        template: str | None = None,
        images: Sequence[ChatImage] = (),
        selection: tuple[SelectedElement, ...] = (),
    ) -> tuple[str, str]:
        """Queue a run for a new user message (with its checked ``images``);
        ``(run_id, message_id)``.

        Raises :class:`RunNotFound` (chat), :class:`InvalidRunRequest`,
        :class:`~app.errors.ConfigError` / :class:`~app.errors.ModelRefused` (provider, model),
        :class:`~app.errors.ImagesUnsupported` (images for a model that cannot read them),
        :class:`~app.errors.AdmissionRefused` (a limit) or :class:`QueueUnavailable` (Redis).
        """
        await self._owned_chat(user_id, chat_id)
        request = _Request(
            user_id, chat_id, content, provider, model, template, tuple(images), selection
        )
        run = await self._admit(request, new_title=None)
        return run.id, run.message_id or ""

    async def start_chat(
        self,
        user_id: str,
        title: str,
        content: str,
        provider: str | None = None,
        model: str | None = None,
        template: str | None = None,
        images: Sequence[ChatImage] = (),
        selection: tuple[SelectedElement, ...] = (),
    ) -> tuple[Chat, str, str]:
        """A new chat created together with its first message and that message's queued run;
        ``(chat, run_id, message_id)``. A refused message creates nothing: the chat is written
        in the same transaction as the message and the run, after admission.

        Raises what :meth:`submit` raises (but never :class:`RunNotFound`).
        """
        request = _Request(
            user_id, new_id(), content, provider, model, template, tuple(images), selection
        )
        run = await self._admit(request, new_title=title)
        chat = await anyio.to_thread.run_sync(self._store.get_chat, request.chat_id)
        if chat is None:  # deleted in the instant since: as if it had never been
            raise RunNotFound(f"no chat {request.chat_id!r}")
        return chat, run.id, run.message_id or ""

    async def _admit(self, request: _Request, new_title: str | None) -> Run:
        """Steps 1 to 4 of the module docstring; the queued run."""
        _check_content(request.content, request.template)
        keys = await anyio.to_thread.run_sync(self._store.provider_keys, request.user_id)
        choice = resolve_provider(request.provider, request.model, self._env, api_keys=keys)
        refuse_unread_images(choice, len(request.images), self._env)
        request = dataclasses.replace(request, provider=choice.provider, model=choice.model)
        run_id, user_id, chat_id = new_id(), request.user_id, request.chat_id
        await self.admission.admit(run_id, user_id, chat_id, request.template or DEFAULT_TEMPLATE)
        try:
            run = await anyio.to_thread.run_sync(
                lambda: self._persist_run(run_id, request, new_title)
            )
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.admission.release(run_id, user_id, chat_id)
            raise
        await self._enqueue(run)
        return run

    def _persist_run(self, run_id: str, request: _Request, new_title: str | None) -> Run:
        """The user's message and its queued run (and the chat, when ``new_title`` is given),
        in one transaction (blocking)."""
        user_id, chat_id, provider, model = (
            request.user_id,
            request.chat_id,
            request.provider or "",
            request.model or "",
        )
        template, content = request.template, request.content
        with self._store.transaction():
            if new_title is not None:
                self._store.create_chat(user_id, new_title, chat_id=chat_id)
            selected = [element.to_dict() for element in request.selection]
            data = {"selection": selected} if selected else None
            message = self._store.add_message(chat_id, "user", content, data, request.images)
            return self._store.create_run(
                chat_id, user_id, message.id, provider, model, template=template, run_id=run_id
            )

    async def _enqueue(self, run: Run) -> None:
        try:
            await self.queue.enqueue(run.id, run.user_id)
        except QueueUnavailable as exc:
            await end_run(
                self._store,
                self._redis,
                self.admission,
                run,
                FAILED,
                "error",
                error=f"the run could not be queued: {exc}",
                from_statuses=(QUEUED,),
            )
            raise

    async def cancel(self, user_id: str, run_id: str) -> Run:
        """Cancel the user's run; the run as it now is.

        :class:`RunNotFound` if it is not the user's, :class:`~app.runs.errors.RunFinished` if
        it has ended already.
        """
        await self.get_run(user_id, run_id)
        return await request_cancel(self._store, self._redis, self.admission, run_id)

    async def get_run(self, user_id: str, run_id: str) -> Run:
        """The user's run, or :class:`RunNotFound`."""
        run = await anyio.to_thread.run_sync(self._store.get_run, run_id)
        if run is None or run.user_id != user_id:
            raise RunNotFound(f"no run {run_id!r}")
        return run

    def follow(self, run_id: str, after_seq: int = 0) -> RunFollower:
        """The run's events after ``after_seq`` (check ownership with :meth:`get_run` first)::

        async with service.follow(run_id, after) as events:
            async for seq, event in events: ...
        """
        return RunFollower(self._store, self._redis, run_id, after_seq, live=self._live)

    async def _owned_chat(self, user_id: str, chat_id: str) -> None:
        chat = await anyio.to_thread.run_sync(self._store.get_chat, chat_id)
        if chat is None or chat.user_id != user_id:
            raise RunNotFound(f"no chat {chat_id!r}")


def _check_content(content: str, template: str | None) -> None:
    if not content.strip():
        raise InvalidRunRequest("a message needs some content, got an empty one")
    if len(content) > MAX_CONTENT_CHARS:
        raise InvalidRunRequest(
            f"a message may have at most {MAX_CONTENT_CHARS} characters, got {len(content)}"
        )
    if template is not None and template not in TEMPLATES:
        known = ", ".join(sorted(TEMPLATES))
        raise InvalidRunRequest(f"unknown template {template!r}; known: {known}")
