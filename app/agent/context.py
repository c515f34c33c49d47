"""Which of a project's files an edit turn shows the model, fitted to a token budget.

A model can only change well what it can see. An edit-mode turn gets a *map* of every project
file (path, size; for source files what they import and export) and the full content of the
files most likely concerned, ranked (:data:`REASONS`, first is strongest):

0. files of the elements the person selected in the preview (:mod:`app.agent.selection`; the
   user turn names their lines);
1. files the request names (by path, file name or stem);
2. the template's entrypoints;
3. the files the named files import (direct imports only);
4. files changed in the last turns;
5. the files the entrypoints import;
6. the files that import a named file;
7. files whose content holds words of the request.

Contents are kept in that order while they fit what the map leaves of the budget, whole or not at
all (``prompts.compose.select_file_contents``: never a file cut in the middle); a file that does
not fit is listed as left out, and the model can ask for it with ``<edward_read path="..."/>``.
Token counts are the real tokenizer's (``count_tokens``).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.postgen.module_resolution import Kind, Project, load_json_object
from app.postgen.source_scan import imports_and_comments
from app.projects.importing import TEMPLATE_MARKERS
from prompts.compose import select_file_contents

CountTokens = Callable[[str], int]

SELECTED = "selected in the preview"
NAMED, ENTRYPOINT, IMPORTED, RECENT, ENTRY_IMPORT, IMPORTER, MATCHED = (
    "named in the request",
    "entrypoint",
    "imported by a named file",
    "changed in the last turns",
    "imported by an entrypoint",
    "imports a named file",
    "matches words of the request",
)
REASONS = (SELECTED, NAMED, ENTRYPOINT, IMPORTED, RECENT, ENTRY_IMPORT, IMPORTER, MATCHED)
DID_NOT_FIT, UNRELATED = "did not fit the budget", "not related to the request"
MIN_WORD = 4  # shorter request words match too much to mean anything
_WORD = re.compile(rf"[A-Za-z_$][\w$-]{{{MIN_WORD - 1},}}")
# Words of a request that say what to do, not what to do it to.
STOP_WORDS = frozenset(
    (
        "about",
        "after",
        "again",
        "also",
        "change",
        "everything",
        "else",
        "from",
        "have",
        "into",
        "just",
        "keep",
        "make",
        "more",
        "please",
        "rename",
        "same",
        "should",
        "that",
        "than",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "want",
        "what",
        "when",
        "where",
        "which",
        "while",
        "with",
        "without",
        "would",
        "your",
    )
)
_EXPORT = re.compile(
    r"^export\s+(?:default\s+)?(?:async\s+)?(?:function\*?|class|const|let|var)?\s*([\w$]*)",
    re.MULTILINE,
)


@dataclass(frozen=True, slots=True)
class ContextFile:
    """One file of the selection: why it was chosen (or left out) and what it costs."""

    path: str
    reason: str
    tokens: int | None = None  # counted for the ranked files only

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"path": self.path, "reason": self.reason, "tokens": self.tokens}


@dataclass(frozen=True)
class ContextSelection:
    """What an edit turn shows: the map, the contents, and the account of both."""

    file_map: str
    contents: dict[str, str | None]  # ranked files: content, or None when it did not fit
    included: tuple[ContextFile, ...]
    left_out: tuple[ContextFile, ...]
    map_tokens: int
    budget_tokens: int

    def to_event(self) -> dict[str, Any]:
        """The ``context`` run event."""
        return {
            "type": "context",
            "budget_tokens": self.budget_tokens,
            "map_tokens": self.map_tokens,
            "included": [f.to_dict() for f in self.included],
            "left_out": [f.to_dict() for f in self.left_out],
        }


def select_context(
    files: Mapping[str, str],
    request: str,
    *,
    template: str,
    entrypoints: Sequence[str],
    recent: Sequence[str] = (),
    selected: Sequence[str] = (),
    budget_tokens: int,
    count_tokens: CountTokens,
) -> ContextSelection:
    """Rank ``files`` for ``request`` (``selected``: files of elements selected in the preview)
    and fit the map and contents into ``budget_tokens``."""
    graph = _imports(files, template)
    ranked = rank_files(files, request, graph, entrypoints, recent, selected)
    file_map = render_map(files, graph)
    map_tokens = count_tokens(file_map)
    candidates = {path: files[path] for path in ranked}
    tokens_of = {path: count_tokens(content) for path, content in candidates.items()}
    room = max(0, budget_tokens - map_tokens)
    by_text = {candidates[path]: n for path, n in tokens_of.items()}
    contents = select_file_contents(candidates, room, lambda t: by_text.get(t) or count_tokens(t))
    included, left_out = [], []
    for path, reason in ranked.items():
        tokens = tokens_of[path]
        if contents[path] is None:
            left_out.append(ContextFile(path, DID_NOT_FIT, tokens))
        else:
            included.append(ContextFile(path, reason, tokens))
    left_out += [ContextFile(path, UNRELATED) for path in files if path not in ranked]
    return ContextSelection(
        file_map, contents, tuple(included), tuple(left_out), map_tokens, budget_tokens
    )


def rank_files(
    files: Mapping[str, str],
    request: str,
    graph: Mapping[str, tuple[str, ...]],
    entrypoints: Sequence[str],
    recent: Sequence[str],
    selected: Sequence[str] = (),
) -> dict[str, str]:
    """Path -> reason for every file worth showing, strongest first (see the module doc)."""
    named = [path for path in files if _named(path, request)]
    words = {word.lower() for word in _WORD.findall(request)} - STOP_WORDS
    tiers: dict[str, list[str]] = {
        SELECTED: [path for path in selected if path in files],
        NAMED: named,
        ENTRYPOINT: [path for path in entrypoints if path in files],
        IMPORTED: [target for path in named for target in graph.get(path, ())],
        RECENT: [path for path in recent if path in files],
        ENTRY_IMPORT: [target for path in entrypoints for target in graph.get(path, ())],
        IMPORTER: [path for path, targets in graph.items() if set(targets) & set(named)],
        MATCHED: _matching(files, words),
    }
    ranked: dict[str, str] = {}
    for reason in REASONS:
        for path in tiers[reason]:
            ranked.setdefault(path, reason)
    return ranked


def _named(path: str, request: str) -> bool:
    """Whether the request names ``path``: the path, its file name, or a stem of 4+ letters."""
    lowered = request.lower()
    name = posixpath.basename(path).lower()
    stem = posixpath.splitext(name)[0]
    if path.lower() in lowered or name in lowered:
        return True
    return len(stem) >= MIN_WORD and re.search(rf"\b{re.escape(stem)}\b", lowered) is not None


def _matching(files: Mapping[str, str], words: set[str]) -> list[str]:
    """Files holding request words, those holding more distinct words first."""
    if not words:
        return []
    scores = {}
    for path, content in files.items():
        lowered = content.lower()
        hits = sum(1 for word in words if word in lowered)
        if hits:
            scores[path] = hits
    return sorted(scores, key=lambda path: -scores[path])


def _imports(files: Mapping[str, str], template: str) -> dict[str, tuple[str, ...]]:
    """Each source file's direct imports that are project files."""
    project = Project.from_files(files, template)
    graph: dict[str, tuple[str, ...]] = {}
    for path, content in files.items():
        scanned = imports_and_comments(path, content)
        if scanned is None:
            continue
        targets = []
        for ref in scanned[0]:
            found = project.resolve_ref(path, ref)
            if found.kind is Kind.FILE and found.target and found.target not in targets:
                targets.append(found.target)
        graph[path] = tuple(targets)
    return graph


def render_map(files: Mapping[str, str], graph: Mapping[str, tuple[str, ...]]) -> str:
    """One line per file: path, size, and for source files their imports and exports."""
    lines = []
    for path, content in files.items():
        line = f"- {path} ({len(content.encode())} bytes)"
        if graph.get(path):
            line += f"; imports {', '.join(graph[path])}"
        exports = [name for name in _EXPORT.findall(content) if name]
        if exports and path in graph:
            line += f"; exports {', '.join(dict.fromkeys(exports))}"
        lines.append(line)
    return "\n".join(lines)


@dataclass(frozen=True)
class ExistingProject:
    """A chat's project that an edit turn changes: its template, text files, recent changes."""

    template: str
    files: dict[str, str]
    recent: tuple[str, ...] = ()


def existing_project(
    stored: Mapping[str, bytes],
    template: str,
    template_files: Mapping[str, str],
    recent: Sequence[str] = (),
) -> ExistingProject | None:
    """The project's text files, or ``None`` when it holds nothing beyond its template's files
    (then a message is a new app, not an edit). Files that are not UTF-8 text are left out."""
    files: dict[str, str] = {}
    for path, content in stored.items():
        try:
            files[path] = content.decode()
        except UnicodeDecodeError:
            continue
    if all(template_files.get(path) == content for path, content in files.items()):
        return None
    return ExistingProject(template, files, tuple(recent))


def guess_template(files: Mapping[str, bytes], default: str) -> str:
    """The template a project's package.json dependencies point to, ``vanilla`` for a plain
    ``index.html`` project, else ``default``: for a project whose sandbox is gone."""
    package = load_json_object(files.get("package.json", b"").decode(errors="replace"))
    declared: dict[str, Any] = {}
    for key in ("dependencies", "devDependencies"):
        value = package.get(key)
        if isinstance(value, dict):
            declared |= value
    found = next((name for marker, name in TEMPLATE_MARKERS if marker in declared), None)
    return found or ("vanilla" if "index.html" in files else default)
