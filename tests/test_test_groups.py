"""The suite's xdist groups (tests/conftest.py): the web modules run on their own really do
without the served kiln, so none of them starts a second one in another process."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import WEB_MODULES_WITHOUT_THE_SERVED_KILN, group_of

ROOT = Path(__file__).resolve().parent.parent
SERVED_KILN_FIXTURES = frozenset({"kiln", "kiln_page", "kiln_state", "demo_chat"})


def fixtures_asked(path: Path) -> set[str]:
    """The parameter names of the module's functions (tests and fixtures ask by name)."""
    tree = ast.parse(path.read_text())
    functions = (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))
    return {arg.arg for function in functions for arg in function.args.args}


@pytest.mark.parametrize("module", sorted(WEB_MODULES_WITHOUT_THE_SERVED_KILN))
def test_a_web_module_on_its_own_asks_for_no_served_kiln(module: str) -> None:
    path = ROOT / module
    assert path.is_file(), f"{module!r} is listed but does not exist"
    assert not fixtures_asked(path) & SERVED_KILN_FIXTURES


@pytest.mark.parametrize(
    ("nodeid", "group"),
    [
        pytest.param("tests/web/test_preview.py::test_x", "tests/web", id="served-kiln"),
        pytest.param("tests/web/test_cards.py::test_x", "tests/web/test_cards.py", id="alone"),
        pytest.param("tests/runs/test_queue.py::test_x", "tests/runs/test_queue.py", id="module"),
        pytest.param("tests/cluster/test_nodes.py::test_x", "tests/cluster", id="cluster"),
    ],
)
def test_the_group_of_a_test(nodeid: str, group: str) -> None:
    assert group_of(nodeid) == group
