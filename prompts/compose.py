"""Assemble kiln's prompts from the plain-text templates in this folder.

The texts live in ``prompts/*.txt`` with ``{{name}}`` placeholders; :func:`fill` refuses a
placeholder left unfilled or a value nobody asked for, so a renamed placeholder fails loudly.

- :func:`system_prompt` - base rules and tag grammar + the framework's section + the mode's
  section + a worked example for the framework + (optionally) the project's current files.
- :func:`continuation_prompt` - the user message after a turn that called tools: the original
  request, the files written so far and the tool results, cut to a token budget.
- :func:`nudge_prompt` - the one-time nudge after a turn that produced nothing.
- :func:`fixup_prompt` - validation findings and build errors for a fix-up turn.

This package never imports ``app``: tool results and findings come in as anything shaped like
:class:`ToolResultLike` / :class:`FindingLike`, and token counting as a ``count_tokens``
callable.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from typing import Any, NamedTuple, Protocol

from prompts.fitting import (
    CountTokens,
    Keep,
    PromptBudgetError,
    fair_shares,
    truncate_to_tokens,
)
from sandbox import get_template

_PLACEHOLDER = re.compile(r"\{\{([a-z_]+)\}\}")
_SECTION_BREAK = "\n\n"
_SHRINK_ROUNDS = 8  # token counts of parts are not additive; re-fit a few times, then give up
MAX_LISTED_PROBLEMS = 50
TAIL_TOOLS = frozenset({"command", "build"})  # outputs whose end matters most


class Mode(StrEnum):
    """What the user's message asks of the model."""

    GENERATE = "generate"
    EDIT = "edit"
    FIX = "fix"


class ToolResultLike(Protocol):
    """A tool's result as the model should see it (``app.agent.web_tools.ToolResult`` fits)."""

    @property
    def tool(self) -> str:
        """``web_search``, ``url_scrape``, ``command``, ..."""

    @property
    def request(self) -> str:
        """The query, URL or command line."""

    @property
    def ok(self) -> bool:
        """Whether the tool succeeded."""

    @property
    def text(self) -> str:
        """The result or the error, as text."""


class FindingLike(Protocol):
    """A validation finding (``app.postgen.validation.Finding`` fits)."""

    @property
    def code(self) -> str:
        """A stable identifier such as ``unresolved_import``."""

    @property
    def path(self) -> str:
        """The file concerned."""

    @property
    def line(self) -> int | None:
        """The 1-based line, when known."""

    @property
    def message(self) -> str:
        """What is wrong, for a human and for the model."""


@functools.cache
def load_text(name: str) -> str:
    """The text of ``prompts/{name}.txt`` (cached; the files are package data)."""
    resource = resources.files("prompts").joinpath(f"{name}.txt")
    if not resource.is_file():
        raise FileNotFoundError(f"no prompt text named {name!r}")
    return resource.read_text(encoding="utf-8").strip("\n")


def fill(text: str, **values: str) -> str:
    """Replace every ``{{name}}`` in ``text``; every placeholder and every value must be used."""
    wanted = set(_PLACEHOLDER.findall(text))
    missing, unused = wanted - values.keys(), values.keys() - wanted
    if missing or unused:
        raise ValueError(
            f"placeholders not filled: {sorted(missing)!r}; unused: {sorted(unused)!r}"
        )
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], text)


class EnvName(NamedTuple):
    """A variable of the app's environment as the model is told of it: never its value."""

    name: str
    public: bool  # a bundler's public prefix (VITE_, NEXT_PUBLIC_): the build may inline it
    secret: bool


def system_prompt(
    framework: str,
    mode: Mode | str = Mode.GENERATE,
    *,
    existing_files: Mapping[str, str | None] | None = None,
    file_map: str = "",
    app_env: Sequence[EnvName] = (),
) -> str:
    """The system prompt for ``framework`` (a template name) in ``mode``.

    ``existing_files`` maps a project path to its content, or to ``None`` for a file that exists
    but is left out for space (:func:`select_file_contents` makes that choice for a budget);
    ``file_map`` lists every file of the project (``app.agent.context`` renders it). The worked
    example is the edit-mode one (``example_edit_<framework>``) in edit mode. ``app_env`` names
    the app's environment variables (:func:`app_env_section`).
    Raises ``KeyError`` for an unknown framework and ``ValueError`` for an unknown mode.
    """
    template = get_template(framework)
    chosen = Mode(mode)
    values = {
        "framework": template.name,
        "entrypoints": ", ".join(template.entrypoints),
        "config_files": ", ".join(template.config_files),
        "dev_port": str(template.dev_port),
        "dev_command": " ".join(template.dev_command),
    }
    sections = [
        _fill_from("system_base", values),
        _fill_from(f"framework_{template.name}", values),
        load_text(f"mode_{chosen.value}"),
        "# Example of a complete answer\n\n" + load_text(_example_name(template.name, chosen)),
    ]
    if app_env:
        sections.append(app_env_section(app_env, template.name))
    if existing_files or file_map:
        sections.append(existing_files_section(existing_files or {}, file_map))
    return _SECTION_BREAK.join(sections) + "\n"


def app_env_section(variables: Sequence[EnvName], framework: str) -> str:
    """The section naming the app's environment variables (names and kinds, never values), so
    the model reads them where the app runs instead of writing a value into a file; browser code
    reads a public one as ``framework``'s bundler has it (none in a template without one)."""
    template = get_template(framework)
    lines = []
    for item in variables:
        server = f"`process.env.{item.name}`"
        browser = template.public_env_prefix and item.name.startswith(template.public_env_prefix)
        if browser:
            read = template.browser_env_read.format(name=item.name)
            where = f"public: in browser code as `{read}`, and server code as {server}"
        elif item.public:
            where = f"public, never a secret: server code and commands, as {server}"
        elif item.secret:
            where = f"secret: server code and commands only, as `process.env.{item.name}`"
        else:
            where = f"server code and commands, as `process.env.{item.name}`"
        lines.append(f"- `{item.name}` ({where})")
    return fill(load_text("app_env"), variables="\n".join(lines))


def _fill_from(name: str, values: Mapping[str, str]) -> str:
    """The text ``name`` filled from those of ``values`` it has placeholders for."""
    text = load_text(name)
    wanted = set(_PLACEHOLDER.findall(text))
    return fill(text, **{key: value for key, value in values.items() if key in wanted})


def _example_name(framework: str, mode: Mode) -> str:
    """The worked example's text name: edit mode shows edit blocks, the others a new app."""
    return f"example_edit_{framework}" if mode is Mode.EDIT else f"example_{framework}"


def existing_files_section(files: Mapping[str, str | None], file_map: str = "") -> str:
    """The system prompt's section with the project's file map and current files."""
    blocks = []
    for path, content in files.items():
        quoted = html.escape(path, quote=True)
        if content is None:
            blocks.append(f'<current_file path="{quoted}" omitted="true" />')
        else:
            blocks.append(f'<current_file path="{quoted}">\n{content.rstrip()}\n</current_file>')
    listed = file_map or "\n".join(f"- {path}" for path in files)
    return fill(load_text("existing_files"), file_map=listed, files="\n".join(blocks))


def select_file_contents(
    files: Mapping[str, str], budget_tokens: int, count_tokens: CountTokens
) -> dict[str, str | None]:
    """Keep the contents of ``files`` (in the given, priority order) while they fit the budget.

    A file that does not fit what is left keeps its place with ``None`` (listed, not shown);
    a later, smaller file may still fit. No file is ever cut in half.
    """
    left = budget_tokens
    chosen: dict[str, str | None] = {}
    for path, content in files.items():
        cost = count_tokens(content)
        if cost <= left:
            chosen[path] = content
            left -= cost
        else:
            chosen[path] = None
    return chosen


def nudge_prompt() -> str:
    """The one-time message sent after a turn with no text, no files and no actions."""
    return load_text("nudge") + "\n"


def continuation_prompt(
    request: str,
    files_written: Iterable[str],
    tool_results: Sequence[ToolResultLike],
    budget_tokens: int,
    count_tokens: CountTokens,
) -> str:
    """The user message that carries tool results into the next turn, within ``budget_tokens``.

    Files are listed by path only: the model's own previous turn, with their contents, is
    expected in the messages before this one. What gives way, in order: the tool results'
    texts (shared fairly; search results keep their beginning, command output its end), then
    the original request (its beginning is kept). The file list and the frame are never cut;
    if they alone exceed the budget this raises :class:`~prompts.fitting.PromptBudgetError`.
    """
    parts = _Continuation(_file_list(files_written), tool_results, budget_tokens, count_tokens)
    whole = parts.render(request, [result.text for result in tool_results])
    if count_tokens(whole) <= budget_tokens:
        return whole
    frame = count_tokens(parts.render(request))
    if frame <= budget_tokens:
        return parts.fit_results(request, budget_tokens - frame)
    return parts.fit_request(request)


@dataclass(frozen=True, slots=True)
class _Continuation:
    """The parts of a continuation prompt and the ways of fitting them to the budget."""

    files_text: str
    results: Sequence[ToolResultLike]
    budget: int
    count: CountTokens

    def render(self, request: str, texts: Sequence[str] | None = None) -> str:
        """The prompt with ``request`` and the results' ``texts`` (empty when ``None``)."""
        shown = [""] * len(self.results) if texts is None else texts
        blocks = [_tool_result_block(r, t) for r, t in zip(self.results, shown, strict=True)]
        text = fill(
            load_text("continuation"),
            request=request,
            files_written=self.files_text,
            tool_results="\n".join(blocks) or "(none)",
        )
        return text + "\n"

    def fit_results(self, request: str, room: int) -> str:
        """Cut the results' texts to share ``room`` tokens (the request stays whole)."""
        sizes = [self.count(result.text) for result in self.results]

        def attempt(shrink: int) -> str:
            shares = fair_shares(sizes, room - shrink)
            texts = [
                truncate_to_tokens(r.text, share, self.count, _keep_for(r.tool))
                for r, share in zip(self.results, shares, strict=True)
            ]
            return self.render(request, texts)

        return _shrink_until_fits(attempt, self.budget, self.count)

    def fit_request(self, request: str) -> str:
        """Leave the results' texts out and cut the request (its beginning is kept)."""
        bare = self.count(self.render(""))
        if bare > self.budget:
            raise PromptBudgetError(
                f"the continuation prompt needs {bare} tokens without request or tool results,"
                f" more than its budget of {self.budget}"
            )
        room = self.budget - bare

        def attempt(shrink: int) -> str:
            return self.render(truncate_to_tokens(request, room - shrink, self.count, Keep.HEAD))

        return _shrink_until_fits(attempt, self.budget, self.count)


def _shrink_until_fits(
    attempt: Callable[[int], str], budget: int, count_tokens: CountTokens
) -> str:
    """Call ``attempt(shrink)`` with a growing ``shrink`` until its text fits ``budget``."""
    shrink = 0
    for _ in range(_SHRINK_ROUNDS):
        text = attempt(shrink)
        over = count_tokens(text) - budget
        if over <= 0:
            return text
        shrink += over + max(1, shrink // 4)
    raise PromptBudgetError(f"could not fit the prompt into {budget} tokens")


def _keep_for(tool: str) -> Keep:
    """Which end of a tool's output matters most."""
    return Keep.TAIL if tool in TAIL_TOOLS else Keep.HEAD


def _file_list(paths: Iterable[str]) -> str:
    """One ``- path`` line per file, or ``(none yet)``."""
    lines = [f"- {path}" for path in paths]
    return "\n".join(lines) if lines else "(none yet)"


def _tool_result_block(result: ToolResultLike, text: str) -> str:
    """One tool result as a tagged block; attribute values are escaped, the text is not."""
    tool = html.escape(result.tool, quote=True)
    request = html.escape(result.request, quote=True)
    status = "ok" if result.ok else "failed"
    opening = f'<tool_result tool="{tool}" request="{request}" status="{status}">'
    return f"{opening}\n{text}\n</tool_result>"


def fixup_prompt(
    findings: Sequence[FindingLike],
    *,
    render_errors: Sequence[Mapping[str, Any]] = (),
    render_files: Mapping[str, str] | None = None,
    build_output: str | None = None,
    attempt: int = 1,
    max_attempts: int = 1,
    build_output_budget_tokens: int | None = None,
    count_tokens: CountTokens | None = None,
) -> str:
    """The user message of a fix-up turn: the findings, then the build's output (its end).

    At most :data:`MAX_LISTED_PROBLEMS` findings are listed (the rest are counted). The build
    output is cut to ``build_output_budget_tokens`` when both it and ``count_tokens`` are given.
    """
    if not findings and not build_output and not render_errors:
        raise ValueError("a fix-up prompt needs findings, render errors or build output")
    lines = [_finding_line(finding) for finding in findings[:MAX_LISTED_PROBLEMS]]
    lines += [_render_line(error) for error in render_errors[:MAX_LISTED_PROBLEMS]]
    listed = len(findings) + len(render_errors)
    if listed > len(lines):
        lines.append(f"- ... and {listed - len(lines)} more problems")
    problems = "\n".join(lines) if lines else "- the build failed; its output is below"
    output = build_output or ""
    if output and build_output_budget_tokens is not None and count_tokens is not None:
        output = truncate_to_tokens(output, build_output_budget_tokens, count_tokens, Keep.TAIL)
    output_block = f"\n<build_output>\n{output.rstrip()}\n</build_output>\n" if output else ""
    text = fill(
        load_text("fixup"),
        attempt=str(attempt),
        max_attempts=str(max_attempts),
        problems=problems,
        build_output=output_block,
        render_check=_render_block(render_errors, render_files or {}),
    )
    return text + "\n"


def _render_line(error: Mapping[str, Any]) -> str:
    """``- file:line [kind] message`` and the stack's first lines, in the browser's words."""
    source = error.get("source") or {}
    where = f"{source['file']}:{source['line']}" if source.get("file") else error.get("url", "")
    stack = "\n".join(
        f"    {line.strip()}" for line in str(error.get("stack", "")).splitlines()[:5]
    )
    head = f"- {where} [{error['kind']}] {error['message']}"
    return f"{head}\n{stack}" if stack else head


def _render_block(errors: Sequence[Mapping[str, Any]], files: Mapping[str, str]) -> str:
    """Why the render check's problems are there, and the current content of the files they
    name (the model fixes what is, not what it remembers)."""
    if not errors:
        return ""
    current = "".join(
        f'<current_file path="{path}">\n{content.rstrip()}\n</current_file>\n'
        for path, content in files.items()
    )
    intro = (
        "\nThe app builds, but kiln opened it in a headless browser and the problems marked"
        " [uncaught], [unhandled_rejection], [console_error], [vite_error], [module_load],"
        " [network] or [blank_page] happened there (the browser's own words; file:line is the"
        " original source).\n"
    )
    return intro + current


def _finding_line(finding: FindingLike) -> str:
    """``- path:line [code] message``."""
    where = finding.path if finding.line is None else f"{finding.path}:{finding.line}"
    return f"- {where} [{finding.code}] {finding.message}"
