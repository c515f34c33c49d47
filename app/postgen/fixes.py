"""Deterministic repairs of a generated project, before its build (DESIGN.md, flow step 7).

Every fix is a pure function of the project (path -> content, template files included) that
returns only the files it changed, a :class:`Fix` note per change, and for the dependency fix
the packages to install. Nothing here touches a sandbox: the agent loop writes ``changed`` to
the sandbox (so the build sees the repaired files) and queues ``packages_to_install``.

Each fix acts only when the repair is unambiguous; anything else is left to validation and the
fix-up turns:

- :func:`strip_fences` - a markdown fence wrapping a code file, or a lone fence as its first or
  last line, is removed (fences in the middle of a file are left: which part is code?).
- :func:`restore_entrypoints` - a missing boot entrypoint (``index.html``, ``src/main.jsx``,
  ``app/layout.jsx``) comes back from the template; never the root component (``App``/``page``):
  the template's is a placeholder, and only the model can write the real one.
- :func:`fix_import_paths` - a relative import that names no file is rewritten when exactly one
  project file fits it: the same name with another JS/TS extension (``./App.jsx`` ->
  ``./App.tsx``) or differing only in letter case (``./components/todoItem`` ->
  ``./components/TodoItem``).
- :func:`add_missing_dependencies` - packages imported but not declared are added to
  package.json ``dependencies`` as ``latest`` and returned for installing (npm then saves the
  real version).

:func:`apply_fixes` runs them in that order, each on the previous one's result.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from app.postgen.module_resolution import (
    RESOLVE_EXTENSIONS,
    Kind,
    Project,
    declared_packages,
    load_json_object,
    spec_name,
)
from app.postgen.source_scan import HTML_EXTENSIONS, ImportRef, imports_and_comments
from app.postgen.validation import (
    FENCE_CHECKED_EXTENSIONS,
    IGNORED_DIRS,
    ROOT_COMPONENTS,
    entrypoint_present,
)
from parser.fences import FENCE_LINE
from sandbox import Template, strip_wrapping_fence

_SCRIPT_EXTENSIONS = frozenset({".js", ".jsx", ".ts", ".tsx", ".mjs", ".mts"})


@dataclass(frozen=True, slots=True)
class Fix:
    """One repair, for the user's log and the run's record."""

    code: str
    path: str
    message: str


@dataclass(slots=True)
class FixResult:
    """What a fix changed: new contents of the changed files only."""

    changed: dict[str, str] = field(default_factory=dict)
    fixes: list[Fix] = field(default_factory=list)
    packages_to_install: list[str] = field(default_factory=list)

    def merge(self, other: FixResult) -> None:
        """Add ``other``'s changes (it ran after this one, so its contents win)."""
        self.changed.update(other.changed)
        self.fixes.extend(other.fixes)
        self.packages_to_install.extend(other.packages_to_install)


def _checked(files: Iterable[str]) -> list[str]:
    return sorted(path for path in files if not path.startswith(IGNORED_DIRS))


def strip_fences(files: Mapping[str, str]) -> FixResult:
    """Remove wrapping fences and lone first/last fence lines from code files."""
    result = FixResult()
    for path in _checked(files):
        if not path.lower().endswith((*FENCE_CHECKED_EXTENSIONS, *HTML_EXTENSIONS)):
            continue
        text = files[path]
        fixed = _drop_edge_fences(strip_wrapping_fence(text))
        if fixed != text:
            result.changed[path] = fixed
            result.fixes.append(Fix("markdown_fence", path, "removed a leftover markdown fence"))
    return result


def _drop_edge_fences(text: str) -> str:
    """``text`` without a fence line as its first or last non-blank line."""
    lines = text.split("\n")
    filled = [index for index, line in enumerate(lines) if line.strip()]
    if not filled:
        return text
    edges = {filled[0], filled[-1]}
    drop = {index for index in edges if FENCE_LINE.fullmatch(lines[index])}
    return "\n".join(line for index, line in enumerate(lines) if index not in drop)


def restore_entrypoints(
    files: Mapping[str, str], template: Template, template_files: Mapping[str, str]
) -> FixResult:
    """Bring back the template's boot entrypoints that are missing (see the module doc)."""
    result = FixResult()
    roots = set(ROOT_COMPONENTS.get(template.name, ()))
    for path in template.entrypoints:
        if path in roots or entrypoint_present(path, files) or path not in template_files:
            continue
        result.changed[path] = template_files[path]
        result.fixes.append(Fix("missing_entrypoint", path, "restored from the template"))
    return result


def fix_import_paths(files: Mapping[str, str], template: Template) -> FixResult:
    """Rewrite relative imports that name no file when exactly one file fits them."""
    project = Project.from_files(files, template.name)
    result = FixResult()
    for path in _checked(files):
        scanned = imports_and_comments(path, files[path])
        if scanned is None:
            continue
        text = files[path]
        for ref in scanned[0]:
            replacement = _unambiguous_target(project, path, ref)
            if replacement is None:
                continue
            rewritten = _replace_on_line(text, ref, replacement)
            if rewritten != text:
                text = rewritten
                message = f"import {ref.specifier!r} now names {replacement!r}"
                result.fixes.append(Fix("unresolved_import", path, message))
        if text != files[path]:
            result.changed[path] = text
    return result


def _unambiguous_target(project: Project, importer: str, ref: ImportRef) -> str | None:
    """The corrected specifier for ``ref``, if its target is missing and one file fits."""
    resolution = project.resolve_ref(importer, ref)
    wanted = resolution.target
    relative = ref.specifier.startswith((".", "/"))
    if resolution.kind is not Kind.MISSING_FILE or not wanted or not relative:
        return None
    candidates = [path for path in _checked(project.files) if _fits(wanted, path)]
    if len(candidates) != 1:
        return None
    return _specifier_for(importer, ref.specifier, candidates[0])


def _fits(wanted: str, path: str) -> bool:
    """Whether ``path`` is what the missing ``wanted`` most likely meant."""
    wanted_stem, wanted_ext = posixpath.splitext(wanted.lower())
    stem, ext = posixpath.splitext(path.lower())
    if wanted_ext in _SCRIPT_EXTENSIONS:
        return stem == wanted_stem and ext in _SCRIPT_EXTENSIONS
    if wanted_ext and wanted_ext not in RESOLVE_EXTENSIONS and path.lower() == wanted.lower():
        return True  # an asset or stylesheet differing in letter case
    resolvable = ext in RESOLVE_EXTENSIONS
    return resolvable and stem in (wanted.lower(), posixpath.join(wanted.lower(), "index"))


def _specifier_for(importer: str, original: str, target: str) -> str:
    """A specifier for ``target`` written like ``original``: root-relative or relative, and
    with an extension only if ``original`` had one."""
    if original.startswith("/"):
        return "/" + target.removeprefix("public/")
    relative = posixpath.relpath(target, posixpath.dirname(importer) or ".")
    if not relative.startswith("../"):
        relative = "./" + relative
    stem, ext = posixpath.splitext(relative)
    original_ext = posixpath.splitext(original)[1].lower()
    if original_ext in (*RESOLVE_EXTENSIONS, *_SCRIPT_EXTENSIONS, ext.lower()):
        return relative
    return stem.removesuffix("/index") if ext in RESOLVE_EXTENSIONS else relative


def _replace_on_line(text: str, ref: ImportRef, replacement: str) -> str:
    """Replace the quoted specifier on ``ref``'s line (its first quoted occurrence there)."""
    lines = text.split("\n")
    line = lines[ref.line - 1]
    for quote in ('"', "'", "`"):
        quoted = f"{quote}{ref.specifier}{quote}"
        if quoted in line:
            lines[ref.line - 1] = line.replace(quoted, f"{quote}{replacement}{quote}", 1)
            return "\n".join(lines)
    return text


def add_missing_dependencies(
    files: Mapping[str, str],
    template: Template,
    *,
    declared: Iterable[str] = (),
    installed: Iterable[str] = (),
) -> FixResult:
    """Add imported but undeclared packages to package.json and list them for installing."""
    result = FixResult()
    package = load_json_object(files.get("package.json"))
    if "package.json" not in files or not package:
        return result  # no package.json to extend (vanilla pages import by URL)
    known = declared_packages(files) | {spec_name(spec) for spec in [*declared, *installed]}
    missing = sorted(imported_packages(files, template) - known)
    if not missing:
        return result
    dependencies = package.get("dependencies")
    dependencies = dict(dependencies) if isinstance(dependencies, dict) else {}
    dependencies.update(dict.fromkeys(missing, "latest"))
    package["dependencies"] = dict(sorted(dependencies.items()))
    result.changed["package.json"] = json.dumps(package, indent=2) + "\n"
    result.packages_to_install.extend(missing)
    message = f"added {', '.join(missing)} to dependencies"
    result.fixes.append(Fix("undeclared_package", "package.json", message))
    return result


def imported_packages(files: Mapping[str, str], template: Template) -> set[str]:
    """Every npm package the project's code imports (builtins and URLs excluded)."""
    project = Project.from_files(files, template.name)
    names: set[str] = set()
    for path in _checked(files):
        scanned = imports_and_comments(path, files[path])
        for ref in scanned[0] if scanned else ():
            resolution = project.resolve_ref(path, ref)
            if resolution.kind is Kind.PACKAGE and resolution.package:
                names.add(resolution.package)
    return names


@dataclass(frozen=True, slots=True)
class FixReport:
    """The project after every fix, what changed, and what to install."""

    files: dict[str, str]
    changed: dict[str, str]
    fixes: tuple[Fix, ...]
    packages_to_install: tuple[str, ...]


def apply_fixes(
    files: Mapping[str, str],
    template: Template,
    template_files: Mapping[str, str],
    *,
    declared: Iterable[str] = (),
    installed: Iterable[str] = (),
) -> FixReport:
    """Run every fix in order (see the module doc) and collect the outcome."""
    current = dict(files)
    total = FixResult()

    def take(result: FixResult) -> None:
        """Apply a fix's changes before the next fix runs."""
        current.update(result.changed)
        total.merge(result)

    take(strip_fences(current))
    take(restore_entrypoints(current, template, template_files))
    take(fix_import_paths(current, template))
    take(add_missing_dependencies(current, template, declared=declared, installed=installed))
    return FixReport(current, total.changed, tuple(total.fixes), tuple(total.packages_to_install))
