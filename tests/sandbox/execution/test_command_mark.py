"""The mark a command's processes cannot scrub: the argv, reading /proc, and the rule that picks
the leftovers (the sh version runs in a real sandbox in test_commands.py)."""

from __future__ import annotations

import pytest

from sandbox.execution.command_mark import (
    MARK_BASE,
    MarkedProcess,
    leftover_pids,
    marked_argv,
    new_mark,
    parse_limit,
    parse_parent,
)

OURS, OTHER = MARK_BASE + 1, MARK_BASE + 2
OUTSIDE = 4242  # the parent of an exec's first process: outside the container
LIMITS = (
    "Limit                     Soft Limit           Hard Limit           Units     \n"
    "Max realtime priority     0                    0                    \n"
    "Max realtime timeout      {soft}               {hard}               us        \n"
)


def test_the_mark_is_set_by_prlimit_before_the_command() -> None:
    assert marked_argv(["timeout", "5", "npm", "test"], OURS) == [
        "prlimit",
        f"--rttime={OURS}:{OURS}",
        "--",
        "timeout",
        "5",
        "npm",
        "test",
    ]
    assert MARK_BASE <= new_mark() < 2 * MARK_BASE


@pytest.mark.parametrize(
    ("hard", "mark"),
    [
        pytest.param("unlimited", None, id="unlimited"),
        pytest.param(str(OURS), OURS, id="marked"),
    ],
)
def test_the_hard_limit_is_the_mark(hard: str, mark: int | None) -> None:
    assert parse_limit(LIMITS.format(soft="5", hard=hard)) == mark


def test_limits_without_the_line_are_refused() -> None:
    with pytest.raises(ValueError, match="Max realtime timeout"):
        parse_limit("Limit Soft Hard\n")


def test_the_parent_comes_after_a_name_with_spaces_and_parentheses() -> None:
    assert parse_parent("77 (we (ird) name) S 12 77 77 0 -1") == 12


def table(**processes: tuple[int, int | None]) -> dict[int, MarkedProcess]:
    return {int(pid[1:]): MarkedProcess(*fields) for pid, fields in processes.items()}


@pytest.mark.parametrize(
    ("processes", "killed"),
    [
        pytest.param(
            table(p1=(OUTSIDE, None), p7=(1, None), p8=(7, None)), [], id="no-command-processes"
        ),
        pytest.param(
            table(p1=(OUTSIDE, None), p20=(1, OURS), p21=(20, OURS)), [20, 21], id="ours-orphaned"
        ),
        pytest.param(
            table(p10=(OUTSIDE, OURS), p11=(10, OURS)), [10, 11], id="ours-root-still-alive"
        ),
        pytest.param(
            table(p30=(OUTSIDE, OTHER), p31=(30, OTHER), p32=(1, OURS)),
            [32],
            id="another-running-command-spared",
        ),
        pytest.param(
            table(p1=(OUTSIDE, None), p30=(OUTSIDE, OTHER), p31=(30, 7), p40=(1, 9)),
            [31, 40],
            id="lowered-marks-are-leftovers",
        ),
        pytest.param(
            table(p1=(OUTSIDE, None), p31=(1, OTHER)), [31], id="a-command-with-no-root-has-ended"
        ),
    ],
)
def test_leftovers(processes: dict[int, MarkedProcess], killed: list[int]) -> None:
    assert leftover_pids(processes, OURS) == killed
