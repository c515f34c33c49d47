"""``kiln project publish CHAT [VERSION]`` and ``kiln project unpublish CHAT``, from the terminal.

Both work on the data directory (``KILN_DATA_DIR`` or ``--data-dir``) as ``kiln project log``
does, with the store and the published builds of the ``kiln serve`` there (which serves the
link: ``http://<slug>.apps.<public host>/``):

- ``publish``: builds the version (default ``latest``) in a sandbox of its own, of the
  instance of the server on the data dir (its Redis, as ``kiln sandbox`` finds it), stores the
  build and moves the chat's link to it; the build's output goes to stderr, the link to stdout;
- ``unpublish``: the link answers 404 from now on.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

import anyio

from app.api.published_apps import app_url
from app.cli.local_sandbox import cli_sandbox_settings
from app.config import ServiceSettings
from app.errors import ConfigError
from app.projects.errors import ProjectError
from app.projects.store import LATEST, parse_version_ref
from app.publish.errors import PublishError
from app.publish.publisher import Publisher
from app.publish.settings import PublishSettings
from app.publish.storage import LocalBuildStorage
from app.service.workspaces import project_store
from app.store import Store, StoreError
from app.store.publications import Publication
from sandbox import SandboxError, SandboxManager

EXIT_OK, EXIT_FAILED, EXIT_BAD_USAGE = 0, 1, 2


def add_actions(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``publish`` and ``unpublish`` to ``kiln project``."""
    publish = actions.add_parser(
        "publish", help="publish a version at the chat's public link", description=__doc__
    )
    publish.add_argument("chat", help="the chat's id")
    publish.add_argument("version", nargs="?", default=LATEST, help="the version (latest)")
    unpublish = actions.add_parser(
        "unpublish", help="take the chat's public link down", description=__doc__
    )
    unpublish.add_argument("chat", help="the chat's id")
    for parser, run in ((publish, run_publish), (unpublish, run_unpublish)):
        parser.add_argument("--data-dir", type=Path, help="the data directory (KILN_DATA_DIR)")
        parser.set_defaults(handler=_handler(parser.prog, run))


def _handler(
    prog: str, run: Callable[[argparse.Namespace], int]
) -> Callable[[argparse.Namespace], int]:
    def handle(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except (ConfigError, ProjectError, PublishError, SandboxError, StoreError) as exc:
            print(f"{prog}: {exc}", file=sys.stderr)
            return EXIT_FAILED

    return handle


def service_settings(data_dir: Path | None) -> tuple[ServiceSettings, dict[str, str]]:
    """The settings of ``data_dir`` (or ``KILN_DATA_DIR``), and the environment read."""
    env = dict(os.environ)
    if data_dir is not None:
        env["KILN_DATA_DIR"] = str(data_dir)
    return ServiceSettings.from_env(env), env


def run_publish(args: argparse.Namespace) -> int:
    """Build and publish the version; print the link."""
    ref = parse_version_ref(args.version)
    if ref is None:
        print(f"kiln project publish: no version {args.version!r}", file=sys.stderr)
        return EXIT_BAD_USAGE
    settings, env = service_settings(args.data_dir)
    store = Store(settings.database_path, settings.secret_key)
    try:
        if store.get_chat(args.chat) is None:
            print(f"kiln project publish: no chat {args.chat!r}", file=sys.stderr)
            return EXIT_FAILED
        publication = anyio.run(_publish, settings, env, store, args.chat, ref, args.data_dir)
    finally:
        store.close()
    print(f"version {publication.version} published at {link(publication, settings, env)}")
    return EXIT_OK


async def _publish(
    settings: ServiceSettings,
    env: dict[str, str],
    store: Store,
    chat: str,
    ref: int | str,
    data_dir: Path | None,
) -> Publication:
    manager = await SandboxManager.open(cli_sandbox_settings(data_dir, env))
    try:
        publisher = _publisher(settings, env, store, manager)
        publication = await publisher.publish(chat, ref, owner="cli", on_output=_to_stderr)
        await publisher.collect()  # a serving process collects on its own; a data dir may have none
        return publication
    finally:
        await manager.aclose()


async def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


def run_unpublish(args: argparse.Namespace) -> int:
    """Take the link down."""
    settings, env = service_settings(args.data_dir)
    store = Store(settings.database_path, settings.secret_key)
    try:
        publication = anyio.run(_unpublish, _publisher(settings, env, store, None), args.chat)
    finally:
        store.close()
    print(f"{link(publication, settings, env)} no longer serves the app")
    return EXIT_OK


async def _unpublish(publisher: Publisher, chat: str) -> Publication:
    publication = await publisher.unpublish(chat)
    await publisher.collect()
    return publication


def _publisher(
    settings: ServiceSettings, env: dict[str, str], store: Store, manager: SandboxManager | None
) -> Publisher:
    return Publisher(
        project_store(settings),
        store,
        LocalBuildStorage(settings.published_dir),
        manager,
        PublishSettings.from_env(env),
        project_max_bytes=settings.project_max_bytes,
    )


def link(publication: Publication, settings: ServiceSettings, env: dict[str, str]) -> str:
    """The app's URL as ``kiln serve`` on these settings serves it."""
    domain = PublishSettings.from_env(env).domain(settings.public_host)
    return app_url(publication.slug, domain, settings.port)
