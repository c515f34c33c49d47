"""Checks on a generated project before it is built (DESIGN.md, flow step 7).

:func:`validate_project` takes the project as the sandbox holds it - the template's own files
plus everything generated, path -> content - with the template and the packages declared in
install blocks or installed, and returns :class:`Finding` ``{code, path, line, message}``:

- ``missing_entrypoint``: a file of ``template.entrypoints`` is absent (a script entrypoint
  may be any of .jsx/.tsx/.js/.ts: ``src/main.tsx`` stands for ``src/main.jsx``).
- ``invalid_package_json``: package.json is not a JSON object.
- ``unresolved_import``: a relative, root-relative or aliased import (JS/TS, CSS ``@import``,
  HTML ``<script src>`` / stylesheet ``<link>``) names no project file, or a bare specifier is
  not a valid npm name; resolution follows :mod:`app.postgen.module_resolution`.
- ``undeclared_package``: a bare import names a package that is neither in package.json, nor
  declared, nor installed (Node builtins, ``node:``, URLs and virtual modules are exempt).
- ``markdown_fence``: a line that is only a markdown fence, in a JS/TS, CSS or JSON file
  (nowhere valid there); in HTML only as the first or last line (a ``<pre>`` may show one).
- ``placeholder_stub``: a comment that stands in for skipped code
  (:mod:`app.postgen.stub_comments`).
- ``empty_root_component``: the root component (``src/App.*``, ``app/page.*``) is empty or
  renders nothing at all (only ``null`` or an empty fragment); the vanilla page's ``<body>``
  is empty.

Files under ``node_modules/``, ``dist/``, ``build/``, ``.next/`` and ``.git/`` are not checked.
Findings are sorted by path, line and code, so the output is deterministic.
"""

from __future__ import annotations

import functools
import json
import posixpath
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from app.postgen.module_resolution import Kind, Project, declared_packages, spec_name
from app.postgen.source_scan import (
    CSS_EXTENSIONS,
    HTML_EXTENSIONS,
    JS_EXTENSIONS,
    Comment,
    ImportRef,
    imports_and_comments,
    scan_js,
)
from app.postgen.stub_comments import stub_pattern
from parser.fences import FENCE_LINE
from sandbox import Template

SCRIPT_VARIANTS = (".jsx", ".tsx", ".js", ".ts")
IGNORED_DIRS = ("node_modules/", "dist/", "build/", ".next/", ".git/")
FENCE_CHECKED_EXTENSIONS = (*JS_EXTENSIONS, *CSS_EXTENSIONS, ".json")
ROOT_COMPONENTS: Mapping[str, tuple[str, ...]] = {
    "vite-react": ("src/App.jsx", "src/App.tsx", "src/App.js", "src/App.ts"),
    "nextjs": ("app/page.jsx", "app/page.tsx", "app/page.js", "app/page.ts"),
}
_JSX_ELEMENT = re.compile(r"<(?!(?:React\.)?Fragment[\s>])[A-Za-z][\w.:-]*[\s/>]")
_RENDERS_NOTHING = re.compile(
    r"(?:\breturn|=>)\s*\(?\s*(?:null\b|<>\s*</>|<(?:React\.)?Fragment>\s*</(?:React\.)?Fragment>)"
)
_BODY = re.compile(r"<body\b[^>]*>(?P<inner>.*?)</body\s*>", re.IGNORECASE | re.DOTALL)
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem in one file."""

    code: str
    path: str
    line: int | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (events, the fix-up prompt's caller)."""
        return {"code": self.code, "path": self.path, "line": self.line, "message": self.message}


@dataclass(frozen=True)
class _Context:
    files: Mapping[str, str]
    template: Template
    project: Project
    known_packages: frozenset[str]

    @functools.cached_property
    def checked(self) -> list[str]:
        """The project's paths that are checked, sorted."""
        return sorted(path for path in self.files if not path.startswith(IGNORED_DIRS))

    @functools.cached_property
    def scans(self) -> list[tuple[str, list[ImportRef], list[Comment]]]:
        """Each scanned file's imports and comments (scanned once, shared by the rules)."""
        found = ((path, imports_and_comments(path, self.files[path])) for path in self.checked)
        return [(path, scan[0], scan[1]) for path, scan in found if scan is not None]


def validate_project(
    files: Mapping[str, str],
    template: Template,
    *,
    declared: Iterable[str] = (),
    installed: Iterable[str] = (),
) -> list[Finding]:
    """Every finding about ``files`` (see the module doc).

    ``declared`` are install specs or names from install blocks (``zustand@^4`` counts as
    ``zustand``); ``installed`` are package names already in node_modules.
    """
    known = declared_packages(files) | {spec_name(spec) for spec in [*declared, *installed]}
    context = _Context(files, template, Project.from_files(files, template.name), frozenset(known))
    findings = [finding for rule in RULES for finding in rule(context)]
    return sorted(findings, key=lambda f: (f.path, f.line or 0, f.code, f.message))


def _missing_entrypoints(context: _Context) -> Iterator[Finding]:
    for path in context.template.entrypoints:
        if not entrypoint_present(path, context.files):
            message = f"the {context.template.name} template needs {path!r}, which is missing"
            yield Finding("missing_entrypoint", path, None, message)


def entrypoint_present(path: str, files: Collection[str]) -> bool:
    """Whether ``path`` exists, or a JS/TS variant of it (``src/main.tsx`` for ``src/main.jsx``)."""
    stem, ext = posixpath.splitext(path)
    if ext not in SCRIPT_VARIANTS:
        return path in files
    return any(stem + variant in files for variant in SCRIPT_VARIANTS)


def _invalid_package_json(context: _Context) -> Iterator[Finding]:
    text = context.files.get("package.json")
    if text is None:
        return
    try:
        value = json.loads(text)
    except ValueError as exc:
        yield Finding("invalid_package_json", "package.json", None, f"not valid JSON: {exc}")
        return
    if not isinstance(value, dict):
        yield Finding("invalid_package_json", "package.json", None, "not a JSON object")


def _imports(context: _Context) -> Iterator[Finding]:
    for path, refs, _ in context.scans:
        for ref in refs:
            finding = _check_import(context, path, ref)
            if finding is not None:
                yield finding


def _check_import(context: _Context, path: str, ref: ImportRef) -> Finding | None:
    resolution = context.project.resolve_ref(path, ref)
    spec = ref.specifier
    if resolution.kind is Kind.MISSING_FILE:
        looked = f" (looked for {resolution.target!r})" if resolution.target else ""
        message = f"{spec!r} does not resolve to a project file{looked}"
        return Finding("unresolved_import", path, ref.line, message)
    if resolution.kind is Kind.INVALID_PACKAGE:
        message = f"{spec!r} is neither a relative path nor a valid npm package name"
        if spec.startswith(("@/", "~/")):
            message += f"; the {context.template.name} template has no such path alias"
        return Finding("unresolved_import", path, ref.line, message)
    package = resolution.package
    if resolution.kind is Kind.PACKAGE and package and package not in context.known_packages:
        message = f"imports {package!r}, which is not in package.json nor installed"
        return Finding("undeclared_package", path, ref.line, message)
    return None


def _fences(context: _Context) -> Iterator[Finding]:
    for path in context.checked:
        lower = path.lower()
        if lower.endswith(FENCE_CHECKED_EXTENSIONS):
            lines = fence_lines(context.files[path])
        elif lower.endswith(HTML_EXTENSIONS):
            lines = edge_fence_lines(context.files[path])
        else:
            continue
        for line in lines:
            yield Finding(
                "markdown_fence", path, line, "a markdown code fence was left in the file"
            )


def fence_lines(text: str) -> list[int]:
    """The 1-based numbers of the lines that are only a markdown fence."""
    return [text.count("\n", 0, match.start()) + 1 for match in FENCE_LINE.finditer(text)]


def edge_fence_lines(text: str) -> list[int]:
    """Fence lines that are the first or the last non-blank line of ``text``."""
    lines = text.split("\n")
    filled = [number for number, line in enumerate(lines, 1) if line.strip()]
    edges = sorted({filled[0], filled[-1]}) if filled else []
    return [number for number in edges if FENCE_LINE.fullmatch(lines[number - 1])]


def _stubs(context: _Context) -> Iterator[Finding]:
    for path, _, comments in context.scans:
        for comment in comments:
            name = stub_pattern(comment.text)
            if name is not None:
                excerpt = " ".join(comment.text.split())[:80]
                message = f"placeholder comment stands in for missing code ({name}): {excerpt!r}"
                yield Finding("placeholder_stub", path, comment.line, message)


def _empty_root(context: _Context) -> Iterator[Finding]:
    for path in ROOT_COMPONENTS.get(context.template.name, ()):
        text = context.files.get(path)
        if text is not None and renders_nothing(text):
            message = "the root component renders nothing (empty, null or an empty fragment)"
            yield Finding("empty_root_component", path, None, message)
    if context.template.name == "vanilla":
        page = context.files.get("index.html")
        if page is not None and _empty_body(page):
            yield Finding("empty_root_component", "index.html", None, "the page's <body> is empty")


def renders_nothing(source: str) -> bool:
    """Whether a component file is empty, or has no JSX element and only renders nothing."""
    masked = scan_js(source).masked
    if not masked.strip():
        return True
    return _JSX_ELEMENT.search(masked) is None and _RENDERS_NOTHING.search(masked) is not None


def _empty_body(page: str) -> bool:
    match = _BODY.search(page)
    return match is not None and not _HTML_COMMENT.sub("", match.group("inner")).strip()


RULES: tuple[Callable[[_Context], Iterator[Finding]], ...] = (
    _missing_entrypoints,
    _invalid_package_json,
    _imports,
    _fences,
    _stubs,
    _empty_root,
)
