"""How an import specifier in a generated project resolves, by the rules of the template's bundler.

The rules (what validation checks and what the fixes rely on):

- ``./x`` and ``../x`` are relative to the importing file, and so is a bare ``x`` in an HTML
  ``src``/``href`` (a URL); a CSS ``@import "x"`` is a relative file if one exists (postcss
  resolves it that way), else a package (``@import "tailwindcss"``). ``/x`` is relative to the
  project root, then to ``public/`` (Vite serves both there). A query or hash (``./logo.svg?react``,
  ``?url``, ``?raw``) is ignored. A path resolves like Vite does: the exact file, else the path
  plus one of :data:`RESOLVE_EXTENSIONS`, else ``<path>/index`` plus one of them. From a TS file
  a ``.js``/``.jsx``/``.mjs`` path may also name the ``.ts``/``.tsx``/``.mts`` file. Paths are
  case-sensitive (Linux) and may not leave the project.
- A bare specifier names a package: ``@scope/name`` or ``name``, and any subpath after it
  (``react-dom/client`` -> ``react-dom``). It must be a valid npm name, or a Node builtin
  (``fs``, ``fs/promises``: accepted, whatever the environment).
- ``scheme:...`` (``node:fs``, ``virtual:pwa-register``, ``https://esm.sh/x``, ``data:``) and
  ``//host/...`` are external: not checked.
- ``#name`` is a package.json subpath import: fine if package.json declares ``imports``.
- Aliases (``@/components/X``, ``~/x``) resolve only where the template's bundler honours them:
  ``nextjs`` reads ``compilerOptions.paths`` (and ``baseUrl``) from jsconfig.json/tsconfig.json;
  Vite does not read those, and the vite-react config (a template file the model cannot change)
  defines no alias, so there ``@/x`` is an unresolved import.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal

from app.postgen.source_scan import ImportRef
from parser.errors import InvalidPackageError
from parser.packages import validate_package_spec

# Vite's default resolve.extensions, in its order.
RESOLVE_EXTENSIONS = (".mjs", ".js", ".mts", ".ts", ".jsx", ".tsx", ".json")
_TS_IMPORTERS = (".ts", ".tsx", ".mts", ".cts")
_TS_OUTPUTS = {".js": (".ts", ".tsx"), ".jsx": (".tsx",), ".mjs": (".mts",)}
ALIAS_TEMPLATES = frozenset({"nextjs"})  # templates whose bundler reads jsconfig/tsconfig paths
TS_CONFIG_FILES = ("tsconfig.json", "jsconfig.json")
DEPENDENCY_SECTIONS = (
    "dependencies",
    "devDependencies",
    "peerDependencies",
    "optionalDependencies",
)
URL_KINDS = frozenset({"script", "stylesheet"})  # HTML attributes: URLs relative to the page
STYLE_KINDS = frozenset({"css"})  # @import: a relative file first, else a package (postcss)
Bare = Literal["package", "relative", "relative-first"]
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# fmt: off
NODE_BUILTINS = frozenset({
    "assert", "async_hooks", "buffer", "child_process", "cluster", "console", "constants",
    "crypto", "dgram", "diagnostics_channel", "dns", "domain", "events", "fs", "http", "http2",
    "https", "inspector", "module", "net", "os", "path", "perf_hooks", "process", "punycode",
    "querystring", "readline", "repl", "stream", "string_decoder", "sys", "timers", "tls",
    "trace_events", "tty", "url", "util", "v8", "vm", "wasi", "worker_threads", "zlib",
})
# fmt: on


class Kind(Enum):
    """What a specifier turned out to be."""

    FILE = "file"  # resolved to a project file (``target``)
    MISSING_FILE = "missing_file"  # a path (or alias) that names no project file
    PACKAGE = "package"  # a bare package import (``package``)
    INVALID_PACKAGE = "invalid_package"  # bare, but not a valid npm name and no alias
    BUILTIN = "builtin"
    EXTERNAL = "external"  # URL, scheme, virtual module, subpath import: not checked


@dataclass(frozen=True, slots=True)
class Resolution:
    """The outcome of resolving one specifier."""

    kind: Kind
    target: str | None = None  # the project file, or the path that was looked for
    package: str | None = None


@dataclass(frozen=True, slots=True)
class Project:
    """What resolution needs to know about a project: its files, aliases and package.json."""

    files: Collection[str]
    aliases: Mapping[str, str] = field(default_factory=dict)  # "@/" -> "" (root), "~/" -> "src/"
    base_url: str | None = None
    subpath_imports: bool = False

    @classmethod
    def from_files(cls, files: Mapping[str, str], template: str) -> Project:
        """Read aliases and package.json ``imports`` from ``files`` (see the module doc)."""
        package = load_json_object(files.get("package.json"))
        aliases: dict[str, str] = {}
        base_url = None
        if template in ALIAS_TEMPLATES:
            aliases, base_url = _config_aliases(files)
        return cls(frozenset(files), aliases, base_url, isinstance(package.get("imports"), dict))

    def resolve_ref(self, importer: str, ref: ImportRef) -> Resolution:
        """Resolve a reference found by :mod:`app.postgen.source_scan`, by the rules of its kind."""
        if ref.kind in URL_KINDS:
            return self.resolve(importer, ref.specifier, bare="relative")
        if ref.kind in STYLE_KINDS:
            return self.resolve(importer, ref.specifier, bare="relative-first")
        return self.resolve(importer, ref.specifier)

    def resolve(self, importer: str, specifier: str, bare: Bare = "package") -> Resolution:
        """Resolve ``specifier`` as written in the file ``importer``.

        ``bare`` says what a bare ``name/x`` is: a package (JS), a relative URL (HTML
        attributes), or a relative file if one exists and else a package (CSS ``@import``).
        """
        if bare != "package" and _is_bare(specifier):
            local = self.resolve(importer, "./" + specifier)
            if bare == "relative" or local.kind is Kind.FILE:
                return local
        if specifier.startswith("#"):
            kind = Kind.EXTERNAL if self.subpath_imports else Kind.MISSING_FILE
            return Resolution(kind, specifier)
        spec = re.split(r"[?#]", specifier, maxsplit=1)[0]
        if not spec or _SCHEME.match(spec) or spec.startswith("//"):
            return Resolution(Kind.EXTERNAL)
        if spec.startswith(("./", "../")) or spec in (".", ".."):
            return self._file(posixpath.join(posixpath.dirname(importer), spec), importer)
        if spec.startswith("/"):
            found = self._file(spec[1:], importer)
            if found.kind is Kind.MISSING_FILE:
                public = self._file(posixpath.join("public", spec[1:]), importer)
                return public if public.kind is Kind.FILE else found
            return found
        return self._bare(importer, spec)

    def _bare(self, importer: str, spec: str) -> Resolution:
        for prefix, target in sorted(self.aliases.items(), key=lambda item: -len(item[0])):
            if spec == prefix.rstrip("/") or spec.startswith(prefix):
                return self._file(posixpath.join(target, spec[len(prefix) :]), importer)
        name = package_name(spec)
        if name in NODE_BUILTINS:
            return Resolution(Kind.BUILTIN, package=name)
        if self.base_url is not None:
            local = self._file(posixpath.join(self.base_url, spec), importer)
            if local.kind is Kind.FILE:
                return local
        if name is None:
            return Resolution(Kind.INVALID_PACKAGE, spec)
        return Resolution(Kind.PACKAGE, package=name)

    def _file(self, path: str, importer: str) -> Resolution:
        normalized = posixpath.normpath(path)
        if normalized.startswith("../") or normalized == "..":
            return Resolution(Kind.MISSING_FILE, None)
        found = resolve_path(self.files, normalized, ts_importer=importer.endswith(_TS_IMPORTERS))
        return Resolution(Kind.FILE, found) if found else Resolution(Kind.MISSING_FILE, normalized)


def _is_bare(specifier: str) -> bool:
    """Neither a path, nor a URL or scheme, nor a subpath import."""
    return not (specifier.startswith((".", "/", "#")) or _SCHEME.match(specifier) or not specifier)


def resolve_path(files: Collection[str], path: str, *, ts_importer: bool = False) -> str | None:
    """The project file ``path`` names, trying extensions and ``index`` files like Vite."""
    path = "" if path == "." else path
    candidates = [path] if path else []
    candidates += [path + ext for ext in RESOLVE_EXTENSIONS]
    stem, ext = posixpath.splitext(path)
    if ts_importer and ext in _TS_OUTPUTS:
        candidates += [stem + alternative for alternative in _TS_OUTPUTS[ext]]
    index = posixpath.join(path, "index") if path else "index"
    candidates += [index + ext for ext in RESOLVE_EXTENSIONS]
    return next((candidate for candidate in candidates if candidate in files), None)


def package_name(spec: str) -> str | None:
    """The npm package a bare specifier names (``@a/b/c`` -> ``@a/b``), or ``None`` if invalid."""
    parts = spec.split("/")
    name = "/".join(parts[:2]) if spec.startswith("@") else parts[0]
    try:
        validate_package_spec(name)
    except InvalidPackageError:
        return None
    return name if "@" not in name[1:] else None


def spec_name(spec: str) -> str:
    """The package an install spec names: ``zustand@^4`` -> ``zustand``, ``@a/b@1`` -> ``@a/b``."""
    at = spec.find("@", 1)
    return spec if at < 0 else spec[:at]


def load_json_object(text: str | None) -> dict[str, Any]:
    """``text`` parsed as a JSON object; ``{}`` when absent or not an object."""
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def declared_packages(files: Mapping[str, str]) -> set[str]:
    """Every package named in the project's package.json dependency sections."""
    package = load_json_object(files.get("package.json"))
    names: set[str] = set()
    for section in DEPENDENCY_SECTIONS:
        entries = package.get(section)
        if isinstance(entries, dict):
            names.update(name for name in entries if isinstance(name, str))
    return names


def _config_aliases(files: Mapping[str, str]) -> tuple[dict[str, str], str | None]:
    """``compilerOptions.paths`` and ``baseUrl`` of the first jsconfig/tsconfig present."""
    for name in TS_CONFIG_FILES:
        if name in files:
            options = load_json_object(files[name]).get("compilerOptions")
            return _paths_to_aliases(options if isinstance(options, dict) else {})
    return {}, None


def _paths_to_aliases(options: Mapping[str, Any]) -> tuple[dict[str, str], str | None]:
    """``X/*`` -> ``Y/*`` patterns as prefix aliases; targets are relative to ``baseUrl``."""
    raw_base = options.get("baseUrl")
    base = posixpath.normpath(raw_base) if isinstance(raw_base, str) else "."
    aliases: dict[str, str] = {}
    paths = options.get("paths")
    for pattern, targets in paths.items() if isinstance(paths, dict) else ():
        first = targets[0] if isinstance(targets, list) and targets else None
        if isinstance(first, str) and pattern.endswith("/*") and first.endswith("/*"):
            target = posixpath.normpath(posixpath.join(base, first[:-2]))
            aliases[pattern[:-1]] = "" if target == "." else target
    base_url = None if raw_base is None else ("" if base == "." else base)
    return aliases, base_url
