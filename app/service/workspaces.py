"""The worker's workspaces with projects: each run's sandbox restored from, and recorded into,
its chat's project (see :mod:`app.projects.sync`)."""

from __future__ import annotations

from app.agent.workspace import SandboxWorkspace, Workspace
from app.config import ServiceSettings
from app.projects.git_store import GitProjectStore
from app.projects.store import ProjectStore
from app.projects.sync import ProjectSync, manager_installer
from app.runs.execution import WorkspaceFactory
from app.store import Chat, Run
from sandbox import SandboxManager


def project_store(settings: ServiceSettings) -> ProjectStore:
    """The service's project store: local git repositories under the data directory."""
    return GitProjectStore(settings.projects_dir)


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
