"""A chat's project from a git repository: its files become version 1, under the rules of
versions, with a template to run them.

The repository's tip is read by :func:`app.projects.git_remote.clone_files` (limits on
time, download, file count and bytes). Then the rules every version follows
(:mod:`app.projects.rules`): a path outside the workspace or a name that is not UTF-8 is
refused, files an app does not keep as sources (``node_modules/``, ``.git/``, ``dist/``,
logs, ...) are left out and said so, the project cap holds. The template comes from
``package.json``'s dependencies (:data:`TEMPLATE_MARKERS`, policy as data): ``next`` runs as
``nextjs``, ``vite`` or ``react`` as ``vite-react``; a repository without ``package.json`` (a
static site) runs as ``vanilla``, with that template's ``package.json`` and ``server.js`` added
(they serve the files; version 1's note says so). A ``package.json`` that names none of them is
refused in words: kiln has no template that would run it, and a chat whose preview can never
start is worse than a clear no. Later runs of the chat keep the template (the chat's sandbox's,
or :func:`app.agent.context.guess_template` from the same markers when it is gone).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from app.projects.errors import ImportRefused
from app.projects.git_remote import Remote, RemoteLimits, clone_files
from app.projects.rules import check_size, is_source, safe_path, unkeepable_name
from app.projects.store import ProjectStore, Version, VersionInfo

PACKAGE_JSON = "package.json"
# A package.json dependency that tells which template runs a project (the first found wins):
# for an import, and for a run whose chat's sandbox is gone (app.agent.context.guess_template).
TEMPLATE_MARKERS: tuple[tuple[str, str], ...] = (
    ("next", "nextjs"),
    ("vite", "vite-react"),
    ("react", "vite-react"),
)
STATIC_TEMPLATE = "vanilla"
STATIC_SCAFFOLD = ("package.json", "server.js")  # from images/vanilla/workspace


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What an import made: version 1, the template detected, the paths left out (and why)."""

    version: Version
    template: str
    left_out: dict[str, str]

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "version": self.version.to_dict(),
            "template": self.template,
            "left_out": [{"path": path, "reason": why} for path, why in self.left_out.items()],
        }


def import_project(
    store: ProjectStore, chat: str, remote: Remote, limits: RemoteLimits, images_dir: Path
) -> ImportResult:
    """Clone ``remote`` and record its files as ``chat``'s first version (blocking)."""
    cloned, not_files = clone_files(remote, limits)
    files, left_out = project_files(cloned)
    left_out.update(dict.fromkeys(not_files, "a symlink or a submodule, not a file"))
    template = detect_template(files)
    note = f"imported from {remote.url}" + (f" ({remote.branch})" if remote.branch else "")
    if template == STATIC_TEMPLATE and PACKAGE_JSON not in files:
        files.update(static_scaffold(images_dir, files))
        note += f"; the {STATIC_TEMPLATE} template's {' and '.join(STATIC_SCAFFOLD)} added"
    if not files:
        raise ImportRefused(f"the repository {remote.url!r} holds no file a project can keep")
    check_size(files, limits.max_bytes)
    version = store.commit(chat, files, VersionInfo(note=note), always=True)
    assert version is not None  # ``always`` records even an empty change
    return ImportResult(version, template, left_out)


def project_files(cloned: Mapping[str, bytes]) -> tuple[dict[str, bytes], dict[str, str]]:
    """``(the files a version keeps, path -> why each other one is left out)``."""
    files: dict[str, bytes] = {}
    left_out: dict[str, str] = {}
    for path, content in cloned.items():
        if safe_path(path) != path or unkeepable_name(path):
            raise ImportRefused(f"the repository holds a path kiln cannot keep: {path!r}")
        if is_source(path):
            files[path] = content
        else:
            left_out[path] = "not a source file (dependencies, build output, caches, logs)"
    return files, left_out


def detect_template(files: Mapping[str, bytes]) -> str:
    """The template that runs ``files`` (see the module docstring), or :class:`ImportRefused`."""
    raw = files.get(PACKAGE_JSON)
    if raw is None:
        return STATIC_TEMPLATE
    try:
        manifest = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ImportRefused(f"the repository's package.json is not JSON: {exc}") from exc
    if not isinstance(manifest, dict):
        raise ImportRefused("the repository's package.json is not a JSON object")
    names: set[str] = set()
    for section in ("dependencies", "devDependencies"):
        declared = manifest.get(section)
        if isinstance(declared, dict):
            names.update(declared)
    for dependency, template in TEMPLATE_MARKERS:
        if dependency in names:
            return template
    known = ", ".join(f"{dependency!r} ({template})" for dependency, template in TEMPLATE_MARKERS)
    raise ImportRefused(
        f"kiln cannot tell how to run this app: its package.json depends on none of {known}, "
        "and only a repository without package.json runs as a static site"
    )


def static_scaffold(images_dir: Path, files: Mapping[str, bytes]) -> dict[str, bytes]:
    """The vanilla template's files that serve a static site, those the repository lacks."""
    folder = images_dir / STATIC_TEMPLATE / "workspace"
    try:
        return {name: (folder / name).read_bytes() for name in STATIC_SCAFFOLD if name not in files}
    except OSError as exc:
        raise ImportRefused(
            f"the {STATIC_TEMPLATE} template's files are missing from {str(folder)!r} "
            f"(KILN_IMAGES_DIR): {exc}"
        ) from exc
