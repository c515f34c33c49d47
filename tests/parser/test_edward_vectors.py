"""The seed "Edward" parser's test suite, run as data against kiln's parser (edward dialect).

Each vector (``edward_parser_vectors.json``) is one test case. Its ``steps`` map onto kiln's API
(``process`` -> ``feed``, ``flush`` -> ``close``). Where the seed was right, kiln must meet what
the vector asserted (``match`` + ``checks``) *and* emit what Edward actually emitted
(``reference_events_per_step``, merged and normalised). Where DESIGN.md ("Where kiln must be
better than the seed's parser") makes kiln differ, the vector is listed in :data:`DELIBERATE`
with the rule kiln follows and kiln's own events, which the test asserts instead; the test also
proves the listed difference is real, so the table cannot go stale.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

from parser import StreamParser, merge_adjacent
from parser.events import (
    Command,
    Done,
    Event,
    FileContent,
    FileEnd,
    FileStart,
    InstallContent,
    InstallEnd,
    InstallStart,
    SandboxEnd,
    SandboxStart,
    Text,
    ThinkingContent,
    ThinkingEnd,
    ThinkingStart,
)
from parser.packages import parse_install_block
from parser.tags import parse_attributes
from tests.parser.peer_vectors import (
    AnError,
    EventDict,
    has_fields,
    is_subsequence,
    kiln_dicts,
    load_vectors,
    normalise,
    peer_dicts,
)

VECTORS = load_vectors("edward_parser_vectors.json")
STREAM_VECTORS = [v for v in VECTORS if v["kind"] == "stream"]
HELPER_VECTORS = [v for v in VECTORS if v["kind"] == "helper"]
KILN_METHOD = {"process": "feed", "flush": "close"}

Steps = list[list[Event]]


class Deliberate(NamedTuple):
    """A vector where kiln deliberately differs from the seed.

    ``rule`` names the DESIGN.md rule kiln follows instead and says what kiln does. ``steps``
    are kiln's events per step, merged within a step (``AnError`` stands for an error event).
    ``meets_seed_expectation`` is true when kiln still satisfies what the vector *asserted* and
    only Edward's actual output differs. ``raises`` is set when kiln refuses the call itself.
    """

    rule: str
    steps: list[list[Any]]
    meets_seed_expectation: bool = False
    raises: type[Exception] | None = None


COMMANDS = "edward_command parsing > "
UNCLOSED = "Unclosed at end of stream: close() ends every open construct and reports it as an error"

DELIBERATE: dict[str, Deliberate] = {
    "process > should return empty array for non-string input": Deliberate(
        "Typed API (DESIGN Parser: feed(chunk: str)): a non-string chunk is a caller bug, so"
        " kiln raises TypeError instead of silently returning []",
        [],
        raises=TypeError,
    ),
    "process > preserves structural closing tags in literal text content": Deliberate(
        "Tag grammar: <Response>…</Response> is the seed's wrapper around prose; kiln consumes"
        " its tags as markup wherever they appear, like the closers of self-contained tags."
        " The other structural closers, which close nothing here, stay text, as the seed wants",
        [[Text("before</edward_install>mid</edward_sandbox>after</file>endtail</Thinking>")], []],
    ),
    "process > ignores unknown edward closing tags to prevent future tag leaks": Deliberate(
        "Lossless: every input character ends up in an event; a tag kiln does not know is"
        " content, so '</edward_future_tool>' stays in the text instead of vanishing",
        [[Text("x</edward_future_tool>y")]],
    ),
    "process > recovers when edward_done appears before sandbox is explicitly closed": Deliberate(
        "Unclosed constructs are reported: <edward_done /> ends the open sandbox with an"
        " unclosed_tag error before sandbox_end and done (the seed ended it silently)",
        [
            [
                SandboxStart("demo", "node"),
                FileStart("src/App.tsx"),
                FileContent("src/App.tsx", "export default function App(){return null;}"),
                FileEnd("src/App.tsx"),
            ],
            [AnError("unclosed_tag", "sandbox"), SandboxEnd(), Done()],
            [],
        ],
        meets_seed_expectation=True,
    ),
    "process > ignores nested edward_sandbox tags while sandbox is already active": Deliberate(
        "Lossless: the nested opening tag is not content and not obeyed, so kiln reports it"
        " (error unexpected_tag) instead of dropping it silently; both files are kept",
        [
            [SandboxStart("demo", "node")],
            [
                FileStart("src/first.ts"),
                FileContent("src/first.ts", "export const first = 1;"),
                FileEnd("src/first.ts"),
            ],
            [
                AnError("unexpected_tag", "already open"),
                FileStart("src/second.ts"),
                FileContent("src/second.ts", "export const second = 2;"),
                FileEnd("src/second.ts"),
            ],
            [SandboxEnd(), Done()],
            [],
        ],
        meets_seed_expectation=True,
    ),
    "process > should handle COMMAND tags with non-JSON args gracefully": Deliberate(
        "No guessing: args must be a JSON array of strings; kiln reports an error"
        " invalid_command_args naming the value and emits no command, instead of running"
        " grep with a guessed args=[]",
        [[AnError("invalid_command_args", "'useEffect .'")]],
    ),
    "process > rejects absolute and root-escaping file paths": Deliberate(
        "Safe paths: an unsafe path is an invalid_file_path error and the file's content is"
        " skipped; the seed leaked the body and closing tag ('x</file>') as text",
        [
            [SandboxStart(None, None)],
            [AnError("invalid_file_path", "'/etc/passwd'")],
            [AnError("invalid_file_path", "'../secrets.txt'")],
        ],
        meets_seed_expectation=True,
    ),
    "process > should emit error for invalid file path": Deliberate(
        "Safe paths: an empty path is error invalid_file_path (kiln's stable code for every"
        " refused path; the seed used invalid_file_tag and its own wording) and the content is"
        " skipped",
        [[SandboxStart(None, None)], [AnError("invalid_file_path", "empty file path")]],
    ),
    "flush > strips dangling control-tag fragments from TEXT flush": Deliberate(
        "Lossless / Unclosed at end of stream: a partial tag left at close is reported as"
        " error unclosed_tag naming it ('</edward_web_se'), not silently dropped; it never"
        " reaches the text, as the seed wants",
        [[Text("hello")], [AnError("unclosed_tag", "'</edward_web_se'")]],
        meets_seed_expectation=True,
    ),
    "flush > should flush remaining content in THINKING state": Deliberate(
        f"{UNCLOSED}: unclosed_tag for the thinking block, then thinking_end",
        [
            [ThinkingStart(), ThinkingContent("unclosed thinking")],
            [AnError("unclosed_tag", "thinking block"), ThinkingEnd()],
        ],
        meets_seed_expectation=True,
    ),
    "flush > should flush remaining content in FILE state": Deliberate(
        f"{UNCLOSED}: unclosed_tag + file_end for the file, then unclosed_tag + sandbox_end",
        [
            [
                SandboxStart(None, None),
                FileStart("test.ts"),
                FileContent("test.ts", "unclosed file"),
            ],
            [
                AnError("unclosed_tag", "'test.ts'"),
                FileEnd("test.ts"),
                AnError("unclosed_tag", "sandbox block"),
                SandboxEnd(),
            ],
        ],
        meets_seed_expectation=True,
    ),
    "flush > should flush SANDBOX_END in SANDBOX state": Deliberate(
        f"{UNCLOSED} (unclosed_tag before sandbox_end); Lossless: prose inside the sandbox"
        " block is kept as text (the seed dropped 'content')",
        [
            [SandboxStart(None, None), Text("content")],
            [AnError("unclosed_tag", "sandbox block"), SandboxEnd()],
        ],
        meets_seed_expectation=True,
    ),
    "flush > should reset state after flush": Deliberate(
        f"{UNCLOSED}: close() reports and ends the thinking block, then the parser is fresh",
        [
            [ThinkingStart(), ThinkingContent("thinking")],
            [AnError("unclosed_tag", "thinking block"), ThinkingEnd()],
            [Text("new text")],
        ],
        meets_seed_expectation=True,
    ),
    "edge cases > should handle very long content": Deliberate(
        "Lossless: no buffer truncation; all 100000 characters arrive (the seed emitted 10240)",
        [[Text("a" * 100_000)]],
        meets_seed_expectation=True,
    ),
    f"{COMMANDS}parses <edward_install> followed by <edward_command> in same stream": (
        Deliberate(
            "Lossless / no guessing: 'npm install react' is not an install-block line"
            " ('framework:', 'packages:' or '- pkg'), so kiln reports invalid_install_line"
            " naming it instead of dropping it silently; no package is guessed from it",
            [
                [InstallStart()],
                [],
                [
                    AnError("invalid_install_line", "'npm install react'"),
                    InstallContent([], None),
                    InstallEnd(),
                ],
                [Command("cat", ["src/App.tsx"])],
                [],
            ],
            meets_seed_expectation=True,
        )
    ),
    f"{COMMANDS}emits error for <edward_command> missing command attribute": (
        Deliberate(
            "Stable error codes: a missing required attribute is error missing_attribute (the"
            " seed: malformed_edward_command_tag); the message names the attribute",
            [[AnError("missing_attribute", "command")], []],
        )
    ),
    f"{COMMANDS}does not parse <edward_command> inside <edward_sandbox>": Deliberate(
        "Robust tags / Lossless: a command between files inside a sandbox is honoured, not"
        " silently dropped, and prose there is kept as text",
        [
            [SandboxStart("test", None)],
            [Command("cat", ["x"])],
            [Text("some code")],
            [SandboxEnd()],
            [],
        ],
    ),
    "edward_web_search parsing > emits error for <edward_web_search> missing query attribute": (
        Deliberate(
            "Stable error codes: a missing required attribute is error missing_attribute (the"
            " seed: malformed_edward_web_search_tag); the message names the attribute",
            [[AnError("missing_attribute", "query")], []],
        )
    ),
}


def run_steps(steps: list[dict[str, Any]]) -> Steps:
    """Run a vector's process/flush calls on a fresh kiln parser; events per call."""
    parser = StreamParser("edward")
    return [
        parser.feed(step["chunk"]) if step["op"] == "process" else parser.close() for step in steps
    ]


def in_scope(steps: Steps, scope: Any) -> list[Event]:
    """The events of the steps a vector's ``scope`` names (``"all"`` or step indices)."""
    indices = range(len(steps)) if scope in (None, "all") else scope
    return [event for index in indices for event in steps[index]]


# -- the vector's own assertions (match kinds and checks) ---------------------------------


def _match_exact(vector: dict[str, Any], steps: Steps) -> None:
    assert kiln_dicts(in_scope(steps, vector["scope"])) == peer_dicts(vector["expected"])


def _match_exact_per_step(vector: dict[str, Any], steps: Steps) -> None:
    for index, expected in vector["expected_per_step"].items():
        assert kiln_dicts(steps[int(index)]) == peer_dicts(expected), f"step {index}"


def _match_contains(vector: dict[str, Any], steps: Steps) -> None:
    got, want = kiln_dicts(in_scope(steps, vector["scope"])), peer_dicts(vector["expected"])
    assert is_subsequence(want, got, operator.eq), f"{want} not found in order in {got}"


def _contains_partial(expected: list[EventDict], events: list[Event]) -> None:
    got, want = kiln_dicts(events), [normalise(e) for e in expected]
    assert is_subsequence(want, got, has_fields), f"{want} not found in order in {got}"


def _match_contains_partial(vector: dict[str, Any], steps: Steps) -> None:
    _contains_partial(vector["expected"], in_scope(steps, vector["scope"]))


def _match_contains_partial_per_step(vector: dict[str, Any], steps: Steps) -> None:
    for index, expected in vector["expected_per_step"].items():
        _contains_partial(expected, steps[int(index)])


MATCHES: dict[str, Callable[[dict[str, Any], Steps], None]] = {
    "exact": _match_exact,
    "exact_per_step": _match_exact_per_step,
    "contains": _match_contains,
    "contains_partial": _match_contains_partial,
    "contains_partial_per_step": _match_contains_partial_per_step,
    "none": lambda vector, steps: None,  # the vector asserts through its checks only
}


def _texts(events: list[EventDict]) -> list[str]:
    return [event["content"] for event in events if event["type"] == "text"]


def _first(events: list[EventDict], kind: str) -> EventDict:
    found = next((event for event in events if event["type"] == kind), None)
    assert found is not None, f"no {kind} event in {events}"
    return found


def _has_methods(names: list[str]) -> bool:
    parser = StreamParser("edward")
    return all(callable(getattr(parser, KILN_METHOD[name], None)) for name in names)


COUNT_OPS: dict[str, Callable[[int, int], bool]] = {"==": operator.eq, ">=": operator.ge}
CHECKS: dict[str, Callable[[dict[str, Any], list[EventDict]], bool]] = {
    "parser_has_methods": lambda c, ev: _has_methods(c["value"]),
    "no_text_event_contains": lambda c, ev: all(c["value"] not in t for t in _texts(ev)),
    "text_concat_not_contains": lambda c, ev: c["value"] not in "".join(_texts(ev)),
    "text_concat_equals": lambda c, ev: "".join(_texts(ev)) == c["value"],
    "count": lambda c, ev: COUNT_OPS[c["op"]](sum(e["type"] == c["type"] for e in ev), c["value"]),
    "first_of_type_has_fields": lambda c, ev: has_fields(c["fields"], _first(ev, c["type"])),
    "first_of_type_field_contains": lambda c, ev: c["value"] in _first(ev, c["type"])[c["field"]],
    "field_sequence": lambda c, ev: (
        [e[c["field"]] for e in ev if e["type"] == c["type"]] == c["value"]
    ),
    # The test asserted nothing (flush() result length >= 0); the reference comparison that
    # follows is what gives these vectors teeth.
    "trivial": lambda c, ev: True,
}


def check_seed_expectation(vector: dict[str, Any], steps: Steps) -> None:
    """Assert what the seed's test asserted: its match kind, then each of its checks."""
    MATCHES[vector["match"]](vector, steps)
    for check in vector.get("checks", []):
        events = kiln_dicts(in_scope(steps, check.get("scope", vector["scope"])))
        assert CHECKS[check["check"]](check, events), f"check {check} fails on {events}"


def reference_events(vector: dict[str, Any]) -> list[EventDict]:
    """What Edward actually emitted over the whole run, merged and normalised."""
    flat = [event for step in vector["reference_events_per_step"] for event in step]
    return peer_dicts(flat, keep_message=False)


# -- tests --------------------------------------------------------------------------------


@pytest.mark.parametrize("vector", [pytest.param(v, id=v["name"]) for v in STREAM_VECTORS])
def test_stream_vector(vector: dict[str, Any]) -> None:
    """kiln agrees with the seed's vector, or does what DELIBERATE documents instead."""
    deliberate = DELIBERATE.get(vector["name"])
    if deliberate is not None and deliberate.raises is not None:
        with pytest.raises(deliberate.raises):
            run_steps(vector["steps"])
        return
    steps = run_steps(vector["steps"])
    emitted = kiln_dicts((event for step in steps for event in step), keep_message=False)
    if deliberate is None:
        check_seed_expectation(vector, steps)
        assert emitted == reference_events(vector)
        return
    if deliberate.meets_seed_expectation:
        check_seed_expectation(vector, steps)
        assert emitted != reference_events(vector), "listed as a difference, but kiln agrees"
    else:
        with pytest.raises(AssertionError):
            check_seed_expectation(vector, steps)
    assert [merge_adjacent(step) for step in steps] == deliberate.steps


def test_deliberate_differences_name_real_vectors() -> None:
    """A misspelt DELIBERATE entry would silently hold the real vector to the seed's output."""
    assert set(DELIBERATE) <= {vector["name"] for vector in STREAM_VECTORS}


# -- helper vectors: Edward's helper functions mapped onto kiln's equivalents ---------------


def _decode_html_attribute(raw: str, *, expected: Any) -> None:
    """Edward's decodeHtmlAttribute: kiln decodes the XML entities of attribute values."""
    assert parse_attributes(f'value="{raw}"') == {"value": expected}


def _extract_thinking_until_exit(text: str, *, expected: Any) -> None:
    """Edward's extractThinkingContentUntilExit: a structural tag ends the thinking block.

    kiln keeps the thinking content up to the tag, reports the unclosed block (its rule for
    every construct a later tag interrupts) and parses the rest exactly as on its own.
    """
    parser = StreamParser("edward")
    events = merge_adjacent([*parser.feed(text), *parser.close()])
    rest_parser = StreamParser("edward")
    rest = [*rest_parser.feed(expected["nextRemaining"]), *rest_parser.close()]
    assert rest, "the remainder should parse to events of its own"
    assert events == [
        ThinkingStart(),
        ThinkingContent(expected["content"]),
        AnError("unclosed_tag", "thinking block"),
        ThinkingEnd(),
        *rest,
    ]


def _parse_install_dependencies(body: str, *, expected: Any) -> None:
    """Edward's parseInstallDependencies: kiln's ``parse_install_block``, inline and ``-`` lists."""
    block = parse_install_block(body)
    assert block.dependencies == expected
    assert block.rejected == []


HELPERS: dict[str, Callable[..., None]] = {
    "decodeHtmlAttribute": _decode_html_attribute,
    "extractThinkingContentUntilExit": _extract_thinking_until_exit,
    "parseInstallDependencies": _parse_install_dependencies,
}


@pytest.mark.parametrize("vector", [pytest.param(v, id=v["name"]) for v in HELPER_VECTORS])
def test_helper_vector(vector: dict[str, Any]) -> None:
    """Each of Edward's helper cases holds for kiln's equivalent function."""
    HELPERS[vector["function"]](*vector["args"], expected=vector["expected"])
