"""The composed prompts: their structure, the tag grammar, budgets. Not the prose."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from parser import DIALECTS, StreamParser
from parser.assemble import FileAssembler
from parser.events import EditBlock, Error, Event, FileStart
from prompts.compose import (
    MAX_LISTED_PROBLEMS,
    EnvName,
    Mode,
    continuation_prompt,
    fill,
    fixup_prompt,
    load_text,
    nudge_prompt,
    select_file_contents,
    system_prompt,
)
from prompts.fitting import PromptBudgetError
from sandbox.execution.command_policy import POLICY
from sandbox.images.templates import TEMPLATES
from sandbox.writes.edit_blocks import apply_edit_blocks


@dataclass(frozen=True)
class Result:
    tool: str
    request: str
    ok: bool
    text: str


@dataclass(frozen=True)
class Problem:
    code: str
    path: str
    line: int | None
    message: str


def words(text: str) -> int:
    return len(text.split())


def parse(text: str) -> list[Event]:
    parser = StreamParser()
    return parser.feed(text) + parser.close()


FRAMEWORKS = sorted(TEMPLATES)
MODES = list(Mode)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("mode", MODES)
def test_every_framework_and_mode_composes_without_placeholders(framework: str, mode: Mode) -> None:
    prompt = system_prompt(framework, mode)

    assert "{{" not in prompt
    assert "}}" not in prompt
    assert load_text(f"mode_{mode.value}") in prompt


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_system_prompt_names_the_template_facts(framework: str) -> None:
    template = TEMPLATES[framework]
    prompt = system_prompt(framework)

    for path in (*template.entrypoints, *template.config_files):
        assert path in prompt
    assert str(template.dev_port) in prompt
    assert f'base="{framework}"' in prompt
    assert f"framework: {framework}" in prompt


@pytest.mark.parametrize("tag", sorted(DIALECTS["edward"].tags))
def test_the_system_prompt_teaches_every_tag_of_the_dialect(tag: str) -> None:
    assert re.search(rf"<{tag}\b", system_prompt("vite-react"), re.IGNORECASE)


@pytest.mark.parametrize("program", sorted(POLICY))
def test_the_system_prompt_lists_every_allowed_program(program: str) -> None:
    assert re.search(rf"\b{program}\b", system_prompt("vite-react"))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_worked_example_parses_cleanly_for_its_framework(framework: str) -> None:
    events = parse(load_text(f"example_{framework}"))
    types = [event.type for event in events]

    assert not [event for event in events if isinstance(event, Error)]
    assert types.count("done") == 1
    starts = [event for event in events if isinstance(event, FileStart)]
    assert starts
    sandbox = next(event.to_dict() for event in events if event.type == "sandbox_start")
    assert sandbox["base"] == framework


def test_the_example_is_part_of_the_system_prompt() -> None:
    assert load_text("example_nextjs") in system_prompt("nextjs")


def test_unknown_framework_and_mode_are_refused() -> None:
    with pytest.raises(KeyError, match="angular"):
        system_prompt("angular")
    with pytest.raises(ValueError, match="refactor"):
        system_prompt("vite-react", "refactor")


def test_existing_files_are_listed_with_or_without_content() -> None:
    prompt = system_prompt(
        "vite-react",
        Mode.EDIT,
        existing_files={"src/App.jsx": "export default function App() {}\n", "big.js": None},
    )

    shown = '<current_file path="src/App.jsx">\nexport default function App() {}\n</current_file>'
    assert shown in prompt
    assert '<current_file path="big.js" omitted="true" />' in prompt


def test_no_existing_files_section_without_files() -> None:
    assert "<current_file" not in system_prompt("vite-react", Mode.EDIT)


def test_file_paths_are_escaped_in_attributes() -> None:
    prompt = system_prompt("vanilla", existing_files={'a"b.js': "x"})

    assert 'path="a&quot;b.js"' in prompt


def test_select_file_contents_keeps_order_and_never_cuts() -> None:
    files = {"a.js": "one two three", "b.js": "1 2 3 4 5 6 7 8", "c.js": "x y"}

    chosen = select_file_contents(files, 6, words)

    assert chosen == {"a.js": "one two three", "b.js": None, "c.js": "x y"}


def test_fill_refuses_missing_and_unused_values() -> None:
    with pytest.raises(ValueError, match="b"):
        fill("{{a}} {{b}}", a="1")
    with pytest.raises(ValueError, match="c"):
        fill("{{a}}", a="1", c="2")
    assert fill("{{a}}-{{a}}", a="x") == "x-x"


def test_placeholder_syntax_in_values_is_left_alone() -> None:
    prompt = continuation_prompt("render {{request}} literally", [], [], 1000, words)

    assert "render {{request}} literally" in prompt


def test_nudge_is_fixed_text_pointing_at_the_tags() -> None:
    assert nudge_prompt() == nudge_prompt()
    assert "<edward_sandbox>" in nudge_prompt()
    assert "<edward_done />" in nudge_prompt()


SEARCH = Result("web_search", 'Intl "relative" time', True, "1. MDN - Intl.RelativeTimeFormat")
BUILD = Result("command", "npm run build", False, "error: cannot resolve ./App")


def test_the_continuation_carries_request_files_and_results() -> None:
    prompt = continuation_prompt(
        "build a time-ago clock", ["src/App.jsx", "src/index.css"], [SEARCH, BUILD], 10_000, words
    )

    assert "<original_request>\nbuild a time-ago clock\n</original_request>" in prompt
    assert "- src/App.jsx\n- src/index.css" in prompt
    assert (
        '<tool_result tool="web_search" request="Intl &quot;relative&quot; time" status="ok">\n'
        "1. MDN - Intl.RelativeTimeFormat\n</tool_result>"
    ) in prompt
    assert 'tool="command" request="npm run build" status="failed"' in prompt
    assert prompt.index("<original_request>") < prompt.index("<files_written>")
    assert prompt.index("<files_written>") < prompt.index("<tool_results>")


def test_the_continuation_says_when_nothing_was_written() -> None:
    prompt = continuation_prompt("x", [], [SEARCH], 10_000, words)

    assert "<files_written>\n(none yet)\n</files_written>" in prompt


def test_over_budget_results_are_cut_keeping_the_useful_end() -> None:
    search = Result("web_search", "q", True, " ".join(f"s{i}" for i in range(2000)))
    build = Result("command", "npm run build", False, " ".join(f"b{i}" for i in range(2000)))

    prompt = continuation_prompt("make an app", ["src/App.jsx"], [search, build], 400, words)

    assert words(prompt) <= 400
    assert "make an app" in prompt
    assert "- src/App.jsx" in prompt
    assert "s0 s1" in prompt  # a search keeps its best results
    assert "s1999" not in prompt
    assert "b1999" in prompt  # build output keeps its errors
    assert "b0 " not in prompt
    assert prompt.count("characters cut to fit the prompt") == 2


def test_a_small_result_stays_whole_next_to_a_huge_one() -> None:
    small = Result("url_scrape", "https://example.com", True, "short page")
    huge = Result("web_search", "q", True, "w " * 5000)

    prompt = continuation_prompt("req", [], [small, huge], 300, words)

    assert "\nshort page\n" in prompt
    assert words(prompt) <= 300


def test_the_request_is_cut_only_when_results_alone_cannot_make_room() -> None:
    request = " ".join(f"r{i}" for i in range(1000))

    prompt = continuation_prompt(request, [], [SEARCH], 200, words)

    assert words(prompt) <= 200
    assert "r0 r1" in prompt
    assert "r999" not in prompt


def test_a_budget_below_the_frame_is_an_error() -> None:
    with pytest.raises(PromptBudgetError, match="budget of 5"):
        continuation_prompt("req", ["a.js"], [SEARCH], 5, words)


def test_the_continuation_fits_a_real_tokenizer_budget() -> None:
    def chars(text: str) -> int:
        return (len(text) + 3) // 4  # roughly 4 characters per token

    huge = Result("web_search", "q", True, "lorem ipsum " * 10_000)

    prompt = continuation_prompt("req", [], [huge], 1_000, chars)

    assert chars(prompt) <= 1_000


def test_fixup_lists_findings_and_the_end_of_the_build_output() -> None:
    findings = [Problem("unresolved_import", "src/App.jsx", 3, "'./x' does not resolve")]
    output = "\n".join(f"line {i}" for i in range(500)) + "\nerror: Could not resolve './x'"

    prompt = fixup_prompt(
        findings,
        build_output=output,
        attempt=1,
        max_attempts=2,
        build_output_budget_tokens=50,
        count_tokens=words,
    )

    assert "- src/App.jsx:3 [unresolved_import] './x' does not resolve" in prompt
    assert "1 of 2" in prompt
    assert "error: Could not resolve './x'" in prompt
    assert "line 0\n" not in prompt
    assert prompt.index("<problems>") < prompt.index("<build_output>")


def test_fixup_without_a_line_number_and_without_output() -> None:
    prompt = fixup_prompt([Problem("missing_entrypoint", "src/main.jsx", None, "missing")])

    assert "- src/main.jsx [missing_entrypoint] missing" in prompt
    assert "<build_output>" not in prompt


def test_fixup_caps_the_number_of_listed_problems() -> None:
    findings = [Problem("placeholder_stub", f"f{i}.js", 1, "stub") for i in range(60)]

    prompt = fixup_prompt(findings)

    assert prompt.count("[placeholder_stub]") == MAX_LISTED_PROBLEMS
    assert "10 more problems" in prompt


def test_fixup_with_build_output_only() -> None:
    prompt = fixup_prompt([], build_output="Error: boom")

    assert "Error: boom" in prompt


def test_fixup_needs_something_to_fix() -> None:
    with pytest.raises(ValueError, match="findings, render errors or build output"):
        fixup_prompt([])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_edit_example_parses_cleanly_and_applies_to_the_new_app_example(
    framework: str,
) -> None:
    """The edit example changes the app of the generate example: every block must apply."""
    events = parse(load_text(f"example_edit_{framework}"))
    assert not [event for event in events if isinstance(event, Error)]
    assert [event.type for event in events].count("done") == 1
    app = FileAssembler()
    app.apply_all(parse(load_text(f"example_{framework}")))
    blocks: dict[str, list[tuple[str, str]]] = {}
    for event in events:
        if isinstance(event, EditBlock):
            blocks.setdefault(event.path, []).append((event.search, event.replace))
    assert blocks
    changed = []
    for path, edits in blocks.items():
        result = apply_edit_blocks(path, app.files[path], edits)
        assert result.ok, result.message
        changed.append(result.content or "")
    assert any("<h1>Clicker</h1>" in content for content in changed)


def test_edit_mode_shows_the_edit_example_and_the_file_map() -> None:
    prompt = system_prompt(
        "vite-react",
        Mode.EDIT,
        existing_files={"src/App.jsx": "x\n"},
        file_map="- src/App.jsx (2 bytes)\n- src/big.js (9000 bytes)",
    )
    assert load_text("example_edit_vite-react") in prompt
    assert load_text("example_vite-react") not in prompt
    assert "- src/big.js (9000 bytes)" in prompt
    assert load_text("example_vite-react") in system_prompt("vite-react", Mode.GENERATE)


def test_fixup_carries_the_browsers_words_the_line_and_the_current_file() -> None:
    error = {
        "kind": "uncaught",
        "message": "TypeError: Cannot read properties of undefined (reading 'name')",
        "stack": "    at App (http://localhost:5173/src/App.jsx:5:20)",
        "source": {"file": "src/App.jsx", "line": 3, "column": 18},
        "url": "http://localhost:5173/",
        "count": 1,
    }
    prompt = fixup_prompt(
        [], render_errors=[error], render_files={"src/App.jsx": "const user = undefined;\n"}
    )

    assert "- src/App.jsx:3 [uncaught] TypeError: Cannot read properties of undefined" in prompt
    assert "at App (http://localhost:5173/src/App.jsx:5:20)" in prompt
    assert '<current_file path="src/App.jsx">\nconst user = undefined;\n</current_file>' in prompt
    assert "headless browser" in prompt


@pytest.mark.parametrize(
    ("framework", "public", "read"),
    [
        pytest.param(
            "vite-react",
            "VITE_MAP_KEY",
            "public: in browser code as `import.meta.env.VITE_MAP_KEY`",
            id="vite",
        ),
        pytest.param(
            "nextjs",
            "NEXT_PUBLIC_MAP_KEY",
            "public: in browser code as `process.env.NEXT_PUBLIC_MAP_KEY`",
            id="nextjs",
        ),
        pytest.param(
            "nextjs",
            "VITE_MAP_KEY",
            "public, never a secret: server code and commands, as `process.env.VITE_MAP_KEY`",
            id="nextjs-given-vites-prefix",
        ),
        pytest.param(
            "vanilla",
            "VITE_MAP_KEY",
            "public, never a secret: server code and commands, as `process.env.VITE_MAP_KEY`",
            id="vanilla-no-bundler",
        ),
    ],
)
def test_the_app_environment_is_named_never_valued(framework: str, public: str, read: str) -> None:
    names = (
        EnvName(public, public=True, secret=False),
        EnvName("DATABASE_URL", public=False, secret=False),
        EnvName("STRIPE_KEY", public=False, secret=True),
    )
    prompt = system_prompt(framework, app_env=names)
    assert f"`{public}` ({read}" in prompt
    assert "`DATABASE_URL` (server code and commands, as `process.env.DATABASE_URL`)" in prompt
    assert "`STRIPE_KEY` (secret: server code and commands only, as `process.env.STRIPE_KEY`)" in (
        prompt
    )
    assert "# The app's environment" not in system_prompt(framework)
