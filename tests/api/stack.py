"""A whole service for end-to-end tests: store, Redis, the real sandbox manager, workers, HTTP.

Built like ``kiln serve`` builds it (:func:`app.service.stack.open_stack`), inside the test's
event loop, with two test choices: replay recordings come from a test folder, and a recording
whose name starts with ``slow-`` is paced (so that cancels and reconnects happen mid-stream)
while every other one is sent at once.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio
import redis.asyncio

from app.api.app import build_app
from app.api.services import ApiSettings
from app.config import ServiceSettings
from app.providers.replay import ReplayPacing, ReplayProvider
from app.runs.execution import ProviderFactory, ResolvedProvider
from app.runs.service import RunService
from app.service.stack import ServiceStack, open_stack
from app.store import Run
from sandbox.settings import SandboxSettings
from tests.api.harness import serving

SHARED_RECORDINGS = Path(__file__).resolve().parents[3] / "shared" / "recordings"
SLOW_PREFIX = "slow-"
SLOW_TOKENS_PER_SECOND = 150.0
REPLAY_WINDOW = 200_000


LONG_ANSWER_LINES = 120


def copy_recordings(folder: Path) -> Path:
    """The shared recordings under short names, each also as a ``slow-`` variant, and
    ``long``: a conversational answer of a few thousand tokens (no sandbox needed)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, source in (("todo", "todo-vite-react.txt"), ("hello", "hello-conversational.txt")):
        for prefix in ("", SLOW_PREFIX):
            shutil.copy(SHARED_RECORDINGS / source, folder / f"{prefix}{name}.txt")
    lines = [
        f"Line {n}: a steady stream of prose about small web apps."
        for n in range(LONG_ANSWER_LINES)
    ]
    long = "<Response>\n" + "\n".join(lines) + "\n</Response>\n<edward_done />\n"
    for prefix in ("", SLOW_PREFIX):
        (folder / f"{prefix}long.txt").write_text(long)
    return folder


def replay_factory(recordings: Path) -> ProviderFactory:
    """Replay from ``recordings``: ``slow-*`` paced, everything else at once."""

    def build(run: Run, keys: Mapping[str, str]) -> ResolvedProvider:
        model = run.model or "todo-app"
        speed = SLOW_TOKENS_PER_SECOND if model.startswith(SLOW_PREFIX) else None
        provider = ReplayProvider(recordings, pacing=ReplayPacing(tokens_per_second=speed))
        return ResolvedProvider(provider, "replay", model, REPLAY_WINDOW)

    return build


@dataclass
class LiveService:
    """A served, working kiln."""

    url: str
    stack: ServiceStack
    runs: RunService

    @property
    def redis(self) -> redis.asyncio.Redis:
        """The service's Redis client."""
        return self.stack.redis


@contextlib.asynccontextmanager
async def live_service(
    settings: ServiceSettings,
    sandbox_settings: SandboxSettings,
    recordings: Path,
    *,
    workers: int = 1,
    providers: ProviderFactory | None = None,
    provider_env: Mapping[str, str] | None = None,
) -> AsyncIterator[LiveService]:
    """Open the stack, start ``workers`` workers and serve the API; stop it all at the end.

    The workers replay ``recordings`` unless given ``providers``; ``provider_env`` is what the
    API and the run service resolve a message's provider with (a real provider's base URL, say)."""
    async with open_stack(settings, sandbox_settings) as stack, anyio.create_task_group() as tasks:
        for worker in stack.workers(workers, providers or replay_factory(recordings)):
            await tasks.start(worker.run)
        runs = RunService(
            stack.store, stack.redis, settings, env=dict(provider_env or {}), live=stack.live
        )
        api_settings = ApiSettings(
            public_host=settings.public_host,  # the one the workers' preview URLs name
            public_port=settings.port,
            recordings_dir=recordings,
            provider_env=dict(provider_env or {}),
        )
        app = build_app(
            stack.store,
            runs,
            stack.manager,
            settings=api_settings,
            health_checks=stack.health_checks(),
            projects=stack.project_access(),
        )
        async with serving(app) as url:
            yield LiveService(url, stack, runs)
        tasks.cancel_scope.cancel()
