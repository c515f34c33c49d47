"""The dependency rules of docs/architecture.md, checked on every module's imports.

- ``parser`` imports nothing of kiln;
- ``sandbox`` never imports ``app`` or ``prompts`` (it may use ``parser``'s rules);
- ``prompts`` imports neither ``app`` nor ``sandbox``'s internals;
- ``app`` and ``prompts`` use ``sandbox`` through its public API only (``from sandbox import``).

Imports inside functions and ``TYPE_CHECKING`` blocks count too: a lazy import is still a
dependency.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("parser", "sandbox", "app", "prompts")
# Which kiln packages each package may import at all.
ALLOWED: dict[str, frozenset[str]] = {
    "parser": frozenset({"parser"}),
    "sandbox": frozenset({"sandbox", "parser"}),
    "prompts": frozenset({"prompts", "parser", "sandbox"}),
    "app": frozenset({"app", "parser", "sandbox", "prompts"}),
}
# Packages whose modules may only be reached through the package itself by outsiders.
PUBLIC_API_ONLY = frozenset({"sandbox"})


def imported_modules(path: Path) -> Iterator[tuple[int, str]]:
    """Every module ``path`` imports, with the line: ``import a.b`` and ``from a.b import c``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def modules_of(package: str) -> list[Path]:
    """The Python files of one of kiln's packages."""
    return sorted((ROOT / package).rglob("*.py"))


def violations(package: str) -> list[str]:
    """Every import in ``package`` that breaks a rule, as ``file:line: module``."""
    found = []
    for path in modules_of(package):
        for line, module in imported_modules(path):
            top = module.split(".")[0]
            if top not in PACKAGES or top == package:
                continue
            where = f"{path.relative_to(ROOT)}:{line}: {module}"
            if top not in ALLOWED[package]:
                found.append(f"{where} ({package} may not import {top})")
            elif top in PUBLIC_API_ONLY and module != top:
                found.append(f"{where} (use `from {top} import ...`)")
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_follow_the_dependency_rules(package: str) -> None:
    assert violations(package) == []


def test_the_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text("from app.errors import KilnError\nimport sandbox.session\n")
    assert [name for _, name in imported_modules(module)] == ["app.errors", "sandbox.session"]


def test_every_package_has_modules() -> None:
    for package in PACKAGES:
        assert modules_of(package), package
