"""Apply a model's search/replace blocks to a file's content: a pure function.

Each block's SEARCH text must match exactly one place of the content as the blocks before it
left it. An exact match is tried first, then a cascade of looser comparisons, line by line:
line endings, trailing whitespace, indentation, Unicode NFC. Each level must still find exactly
one place; the first level that finds any decides. A block that matches nowhere
(``edit_no_match``) or in several places (``edit_ambiguous``) fails the whole edit: nothing of
it is applied, because half an edit may leave a file that no longer parses.

The replacement keeps the file's conventions where the match was loose: the matched lines'
line ending and the matched indentation (the REPLACE lines are shifted by the difference
between the file's indentation and the SEARCH's).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

EDIT_NO_MATCH = "edit_no_match"
EDIT_AMBIGUOUS = "edit_ambiguous"

LineKey = Callable[[str], str]


def _ending(line: str) -> str:
    return line.rstrip("\r\n")


def _trailing(line: str) -> str:
    return line.rstrip()


def _indentation(line: str) -> str:
    return line.strip()


def _nfc(line: str) -> str:
    return unicodedata.normalize("NFC", line.strip())


# The cascade after the exact match, loosest last: (name, how a line is compared).
LEVELS: tuple[tuple[str, LineKey], ...] = (
    ("line endings", _ending),
    ("trailing whitespace", _trailing),
    ("indentation", _indentation),
    ("unicode NFC", _nfc),
)


@dataclass(frozen=True, slots=True)
class EditResult:
    """The new content, or why the edit was refused (``code``, ``message``)."""

    content: str | None
    code: str = ""
    message: str = ""

    @property
    def ok(self) -> bool:
        """Whether every block applied."""
        return self.content is not None


class _Refused(Exception):
    """A block that cannot be applied (internal: :func:`apply_edit_blocks` returns a result)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def apply_edit_blocks(path: str, content: str, blocks: Sequence[tuple[str, str]]) -> EditResult:
    """``content`` with every ``(search, replace)`` block applied in order, or the refusal."""
    try:
        for number, (search, replace) in enumerate(blocks, start=1):
            content = _apply_one(content, search, replace, f"block {number} of {path!r}")
    except _Refused as exc:
        return EditResult(None, exc.code, f"{exc}; no block of this edit was applied")
    return EditResult(content)


def _apply_one(content: str, search: str, replace: str, what: str) -> str:
    """One block applied: exact match first, then the cascade."""
    if not search.strip():
        if not content.strip():
            return replace
        raise _Refused(EDIT_NO_MATCH, f"{what} has an empty SEARCH part but the file is not empty")
    count = content.count(search)
    if count == 1:
        return content.replace(search, replace, 1)
    if count > 1:
        raise _Refused(EDIT_AMBIGUOUS, _ambiguous(what, count, "exactly"))
    lines, wanted = content.splitlines(keepends=True), search.splitlines(keepends=True)
    for name, key in LEVELS:
        starts = _line_matches(lines, wanted, key)
        if len(starts) == 1:
            start = starts[0]
            new = _adapt(replace, lines[start : start + len(wanted)], wanted)
            return "".join(lines[:start] + new + lines[start + len(wanted) :])
        if starts:
            raise _Refused(EDIT_AMBIGUOUS, _ambiguous(what, len(starts), f"ignoring {name}"))
    tried = ", ".join(name for name, _ in LEVELS)
    raise _Refused(
        EDIT_NO_MATCH, f"{what}: its SEARCH text matches nowhere in the file (exactly, {tried})"
    )


def _ambiguous(what: str, count: int, how: str) -> str:
    return (
        f"{what}: its SEARCH text matches {count} places ({how}); include more of the"
        " surrounding lines so that it matches exactly one"
    )


def _line_matches(lines: Sequence[str], wanted: Sequence[str], key: LineKey) -> list[int]:
    """Every index where ``wanted`` matches a run of ``lines`` under ``key`` (at most two)."""
    keys, wanted_keys = [key(line) for line in lines], [key(line) for line in wanted]
    size, found = len(wanted_keys), []
    first = wanted_keys[0]
    for start in range(len(keys) - size + 1):
        if keys[start] == first and keys[start : start + size] == wanted_keys:
            found.append(start)
            if len(found) > 1:
                break
    return found


def _adapt(replace: str, matched: Sequence[str], wanted: Sequence[str]) -> list[str]:
    """The REPLACE lines in the matched lines' line ending and indentation."""
    newline = "\r\n" if matched[-1].endswith("\r\n") else "\n"
    shift = _indent_shift(matched, wanted)
    out = []
    for line in replace.splitlines(keepends=True):
        body = _ending(line)
        ends = line != body
        out.append(shift(body) + (newline if ends else ""))
    if out and not matched[-1].endswith("\n"):  # the match ended the file without a newline
        out[-1] = _ending(out[-1])
    return out


def _indent_shift(matched: Sequence[str], wanted: Sequence[str]) -> Callable[[str], str]:
    """How to re-indent a REPLACE line: by the file's indentation minus the SEARCH's."""
    pairs = [(m, w) for m, w in zip(matched, wanted, strict=True) if w.strip()]
    if not pairs:
        return lambda line: line
    have, said = _indent(pairs[0][0]), _indent(pairs[0][1])
    if have == said:
        return lambda line: line
    if have.startswith(said):
        extra = have[len(said) :]
        return lambda line: extra + line if line.strip() else line
    if said.startswith(have):
        cut = len(said) - len(have)
        return lambda line: line[cut:] if line[:cut].isspace() else line.lstrip(" \t")
    return lambda line: line


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]
