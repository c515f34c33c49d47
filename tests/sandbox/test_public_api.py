"""sandbox/__init__.py: the public API's three lists agree and every name resolves lazily."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import sandbox

INIT = Path(sandbox.__file__)


def type_checking_imports() -> dict[str, str]:
    """``name -> module`` of the imports in the ``if TYPE_CHECKING:`` block."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom)
                assert stmt.module
                found.update({alias.name: stmt.module for alias in stmt.names})
    return found


def test_exports_match_the_type_checking_imports_and_all() -> None:
    assert type_checking_imports() == sandbox._EXPORTS
    assert sorted(sandbox.__all__) == sorted(sandbox._EXPORTS)


def test_every_export_resolves_to_its_module_object() -> None:
    for name, module in sandbox._EXPORTS.items():
        assert getattr(sandbox, name) is getattr(importlib.import_module(module), name), name


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="'NoSuchThing'"):
        sandbox.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018


def test_importing_one_name_does_not_load_the_docker_sdk() -> None:
    code = "from sandbox import SandboxError; import sys; print('docker' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
