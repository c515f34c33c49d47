"""The worker's workspaces with projects: each run's sandbox restored from, and recorded into,
its chat's project (see :mod:`app.projects.sync`)."""

from __future__ import annotations

import redis

from app.agent.workspace import SandboxWorkspace, Workspace
from app.config import ServiceSettings
from app.projects.commit_lock import commit_lock
from app.projects.git_store import GitProjectStore
from app.projects.sync import ProjectSync, manager_installer
from app.runs.execution import WorkspaceFactory
from app.store import Chat, Run
from sandbox import SandboxManager


def project_store(settings: ServiceSettings) -> GitProjectStore:
    """The service's project store: git repositories in ``KILN_PROJECTS_DIR`` (the data dir's
    ``projects`` unless set), their commits locked per chat in Redis when the process has it
    (hosts sharing the folder take turns), else by a local lock file."""
    client = None if settings.redis_url is None else redis.Redis.from_url(settings.redis_url)
    return GitProjectStore(settings.projects_dir, commit_lock(client))


def project_workspaces(manager: SandboxManager, settings: ServiceSettings) -> WorkspaceFactory:
    """Each run writes into its chat's sandbox, which is a cache of the chat's project."""
    store = project_store(settings)
    install = manager_installer(manager)

    def build(run: Run, chat: Chat) -> Workspace:
        sync = ProjectSync(
            store, manager, chat.id, max_bytes=settings.project_max_bytes, install=install
        )
        return SandboxWorkspace(
            manager, run.template, chat=chat.id, owner=run.user_id, project=sync, run=run.id
        )

    return build
