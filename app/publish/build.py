"""A version's production build, in a sandbox of its own: what a published link serves.

Publishing never needs the chat's sandbox (it may be reaped, or busy with a run): a build gets a
fresh sandbox of the version's template, and removes it when done, whatever happens.

What a template publishes (:data:`OUTPUT`, policy as data):

- ``vite-react``: the version's files are written over the template's workspace (as a restore
  writes them: :func:`app.projects.sync.write_difference`), ``npm install`` runs through the
  sandbox's install queue when ``package.json`` differs from the template's, then ``npm run
  build``; the output is ``dist/``, read out as a tar (regular files only: a symlink is never
  followed) bounded by the size cap;
- ``vanilla``: the version's files as they are, without the template's own (``server.js``,
  ``package.json``): no sandbox at all;
- ``nextjs``: refused in words (``publish_unsupported``): a Next.js app has server code, and
  kiln serves static files.

The template is read from the version's own ``package.json`` (:func:`template_of`): a version
is published as what it is, whatever its chat started as.

The build's environment is the chat's public (``VITE_``, ``NEXT_PUBLIC_``) variables, as
:func:`app.projects.app_env.build_environment` gives them (the caller passes them in); they
reach Vite as ``.env.production.local`` inside the build's sandbox only.
"""

from __future__ import annotations

import contextlib
import io
import json
import tarfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import anyio.to_thread

from app.projects.errors import ProjectError
from app.projects.rules import safe_path
from app.projects.sync import PACKAGE_JSON, RESTORE_INSTALL, write_difference
from app.projects.workspace_io import read_workspace
from app.publish.errors import (
    PublishBuildFailed,
    PublishError,
    PublishTimeout,
    PublishTooLarge,
    PublishUnsupported,
)
from sandbox import BUILD_COMMAND, WORKSPACE, SandboxError, get_template, read_stdout

OutputSink = Callable[[str], Awaitable[None]]
INDEX = "index.html"
TAIL_LINES = 20  # of a failed build's output, in its error's words
# What the output's archive may hold on top of its files' bytes (a header and padding per
# file, closing blocks): the files' own total is checked exactly once read.
ARCHIVE_BYTES_FIXED = 2**20
# Vite reads it for `vite build` (and only then); written into the build's sandbox, never into
# a version.
ENV_FILE = ".env.production.local"


@dataclass(frozen=True, slots=True)
class Output:
    """What a template publishes: its build's output folder, or the version's own files
    (``folder`` empty) without those named in ``left_out``; ``refusal``: why it cannot."""

    folder: str = ""
    left_out: tuple[str, ...] = ()
    refusal: str = ""


OUTPUT: dict[str, Output] = {
    "vite-react": Output(folder="dist"),
    "vanilla": Output(left_out=get_template("vanilla").config_files),
    "nextjs": Output(
        refusal=(
            "a Next.js app has server code and kiln publishes static apps only (vite-react and "
            "vanilla); export it as a static site elsewhere, or build it as a vite-react app"
        )
    ),
}
# ``package.json`` dependencies that name a template, first match wins.
TEMPLATE_MARKERS: tuple[tuple[str, str], ...] = (("next", "nextjs"), ("vite", "vite-react"))


def template_of(files: Mapping[str, bytes]) -> str:
    """The template a version is built with, from its ``package.json``'s dependencies
    (:data:`TEMPLATE_MARKERS`); ``vanilla`` without one."""
    try:
        manifest = json.loads(files.get(PACKAGE_JSON, b"{}"))
    except ValueError:
        manifest = {}
    names: set[str] = set()
    for key in ("dependencies", "devDependencies"):
        declared = manifest.get(key) if isinstance(manifest, dict) else None
        names.update(declared if isinstance(declared, dict) else ())
    return next((template for name, template in TEMPLATE_MARKERS if name in names), "vanilla")


def env_file(variables: Mapping[str, str]) -> bytes:
    """:data:`ENV_FILE`'s text for ``variables`` (a value on one line, as dotenv reads it)."""
    for name, value in variables.items():
        if not name.isidentifier() or "\n" in value or "\r" in value:
            raise PublishError(f"the build variable {name!r} cannot be given to the build")
    return "".join(f"{name}={value}\n" for name, value in sorted(variables.items())).encode()


class BuildSandboxes(Protocol):
    """What a build needs of the sandbox manager (:class:`sandbox.SandboxManager`)."""

    async def provision(
        self, template: str, *, owner: str = "", chat: str = "", state: str = "in_use"
    ) -> Any:
        """A new, started sandbox of ``template``."""
        ...

    async def container_for(self, sandbox_id: str) -> Any:
        """Its running container."""
        ...

    def install_queue(self, sandbox_id: str) -> Any:
        """Its install queue."""
        ...

    async def run_command(
        self, sandbox_id: str, argv: Sequence[str], on_output: OutputSink | None = None
    ) -> Any:
        """Run an allowed command once installs are done."""
        ...

    async def destroy(self, sandbox_id: str) -> None:
        """Remove the sandbox."""
        ...


@dataclass(frozen=True, slots=True)
class BuildLimits:
    """How large a build's output may be, and how long the build may take."""

    max_bytes: int
    seconds: float
    project_max_bytes: int


async def _ignore(line: str) -> None:
    """The default output sink."""


async def build_version(
    sandboxes: BuildSandboxes | None,
    files: Mapping[str, bytes],
    limits: BuildLimits,
    *,
    owner: str = "",
    on_output: OutputSink = _ignore,
    variables: Mapping[str, str] | None = None,
) -> dict[str, bytes]:
    """The files a version publishes (module docstring), ``path -> bytes``, within ``limits``;
    ``variables``: the build's environment (the chat's public variables)."""
    output = OUTPUT[template_of(files)]
    if output.refusal:
        raise PublishUnsupported(output.refusal)
    if not output.folder:
        built = {path: data for path, data in files.items() if path not in output.left_out}
    else:
        if sandboxes is None:
            raise PublishError("this server cannot start a sandbox to build the app")
        extra = {ENV_FILE: env_file(variables)} if variables else {}
        built = await _build_in_sandbox(sandboxes, files, extra, output, limits, owner, on_output)
    return checked(built, limits.max_bytes)


def checked(built: Mapping[str, bytes], max_bytes: int) -> dict[str, bytes]:
    """``built``, if it has an ``index.html`` and is within ``max_bytes``."""
    if INDEX not in built:
        raise PublishBuildFailed(f"the build has no {INDEX!r}: there is no page to serve")
    total = sum(len(data) for data in built.values())
    if total > max_bytes:
        raise PublishTooLarge(f"the build has {total} bytes; at most {max_bytes} are published")
    return dict(built)


async def _build_in_sandbox(
    sandboxes: BuildSandboxes,
    files: Mapping[str, bytes],
    extra: Mapping[str, bytes],
    output: Output,
    limits: BuildLimits,
    owner: str,
    on_output: OutputSink,
) -> dict[str, bytes]:
    """Build in a new sandbox of the version's template (the build, install included, within
    ``limits.seconds``: starting the sandbox has the manager's own limits); the sandbox is
    removed afterwards, however the build ended."""
    try:
        sandbox = await sandboxes.provision(template_of(files), owner=owner, state="in_use")
    except SandboxError as exc:
        raise PublishError(f"no sandbox could be started for the build: {exc}") from exc
    try:
        with anyio.move_on_after(limits.seconds):
            container = await sandboxes.container_for(sandbox.id)
            await _put_version(sandboxes, sandbox.id, container, files, extra, limits, on_output)
            result = await sandboxes.run_command(sandbox.id, BUILD_COMMAND, on_output)
            if not result.ok:
                raise PublishBuildFailed(_failure("npm run build", result))
            return await read_output(container, output.folder, limits)
        raise PublishTimeout(f"the build took longer than {limits.seconds:g} seconds")
    except (SandboxError, ProjectError) as exc:
        raise PublishError(f"the build's sandbox failed: {exc}") from exc
    finally:
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(SandboxError):  # the reaper removes what is left of it
                await sandboxes.destroy(sandbox.id)


async def _put_version(
    sandboxes: BuildSandboxes,
    sandbox_id: str,
    container: Any,
    files: Mapping[str, bytes],
    extra: Mapping[str, bytes],
    limits: BuildLimits,
    on_output: OutputSink,
) -> None:
    """Write the version (and the build's ``extra`` files) over the template's workspace;
    install when package.json differs."""
    snapshot = await read_workspace(container, limits.project_max_bytes, whole=False)
    await write_difference(container, snapshot, {**files, **extra}, "publish")
    if snapshot.complete and snapshot.files.get(PACKAGE_JSON) == files.get(PACKAGE_JSON):
        return  # the template's packages are installed already
    installed = await sandboxes.install_queue(sandbox_id).run_npm(RESTORE_INSTALL, on_output)
    if not installed.ok:
        raise PublishBuildFailed(_failure("npm install", installed.result))


def _failure(what: str, result: Any) -> str:
    """A failed step in words, with the last lines it printed."""
    if result.timed_out:
        return f"{what} did not finish in time"
    lines = [line for line in str(result.output).splitlines() if line.strip()][-TAIL_LINES:]
    tail = "\n".join(lines)
    return f"{what} exited with {result.exit_code}" + (f":\n{tail}" if tail else "")


def output_argv(folder: str) -> list[str]:
    """The call printing a tar of ``folder``'s regular files (symlinks left out)."""
    script = 'cd "$1" && find . -type f -print0 | tar --null --no-recursion -T - -cf -'
    return ["sh", "-c", script, "sh", f"{WORKSPACE}/{folder}"]


async def read_output(container: Any, folder: str, limits: BuildLimits) -> dict[str, bytes]:
    """The files of the build's output ``folder``, its archive read within twice the size cap
    (tar pads small files to 512 bytes; :func:`checked` holds the files to the cap exactly);
    :class:`PublishTooLarge` past it."""
    budget = 2 * limits.max_bytes + ARCHIVE_BYTES_FIXED
    argv = output_argv(folder)
    out = await read_stdout(
        container.client, container.id, argv, max_bytes=budget, timeout=limits.seconds
    )
    if out.over_cap:
        raise PublishTooLarge(
            f"the build's output passed {limits.max_bytes} bytes while being read"
        )
    if out.exit_code != 0:
        raise PublishBuildFailed(f"the build wrote no {folder!r} folder: {out.stderr.strip()!r}")
    return await anyio.to_thread.run_sync(files_of_archive, out.stdout)


def files_of_archive(archive: bytes) -> dict[str, bytes]:
    """The regular files of a tar, by their safe relative paths (anything else left out)."""
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
            for member in tar:
                path = safe_path(member.name)
                extracted = tar.extractfile(member) if member.isreg() and path else None
                if path is not None and extracted is not None:
                    files[path] = extracted.read()
    except tarfile.TarError as exc:
        raise PublishError(f"the build's output cannot be read: {exc}") from exc
    return files
