"""app/errors.py: the one drawing of the exception trees matches the classes, and error codes."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import app.errors
from app.errors import ConfigError, KilnError, error_code
from parser.errors import ProtectedPathError
from sandbox.errors import DiskFull, SandboxError

ROOT = Path(__file__).resolve().parents[2]
# A drawn class: its tree prefix (depth), dotted or bare name, and code in brackets.
DRAWN = re.compile(
    r"^    (?P<prefix>[│├└─ ]*)(?:[a-z_.]+\.)?(?P<name>[A-Z]\w+)(?: \[(?P<code>\w+)\])?"
)
CLASS = re.compile(r"^class (\w+)\(([^)]*)\):", re.MULTILINE)


def drawing() -> dict[str, tuple[str | None, str | None]]:
    """``{class: (drawn parent, drawn code)}`` from app/errors.py's docstring."""
    drawn: dict[str, tuple[str | None, str | None]] = {}
    parents: list[str] = []
    for line in (app.errors.__doc__ or "").splitlines():
        match = DRAWN.match(line)
        if match is None:
            continue
        depth = len(match["prefix"]) // 4
        parents[depth:] = [match["name"]]
        drawn[match["name"]] = (parents[depth - 1] if depth else None, match["code"])
    return drawn


def defined_below(drawn: set[str]) -> dict[str, tuple[str, list[str]]]:
    """``{class: (module, bases)}`` of every class in the code deriving from a drawn class."""
    found: dict[str, tuple[str, list[str]]] = {}
    for package in ("app", "sandbox", "parser", "prompts"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for name, bases in CLASS.findall(path.read_text(encoding="utf-8")):
                names = [base.strip().split(".")[-1] for base in bases.split(",")]
                if drawn & set(names) or name in drawn:
                    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
                    found[name] = (module, names)
    return found


def test_the_drawing_shows_every_class_under_its_parent_with_its_code() -> None:
    drawn = drawing()
    classes = defined_below(set(drawn))
    assert set(classes) == set(drawn)  # a class missing from the drawing, or drawn but gone
    for name, (module, bases) in classes.items():
        parent, code = drawn[name]
        assert parent is None or parent in bases, f"{name} is drawn under {parent}, not {bases}"
        cls = getattr(importlib.import_module(module), name)
        if code is not None:
            assert cls.code == code, f"{name} is drawn with [{code}], its code is {cls.code!r}"
        elif name != "ApiError":  # the one class whose code is per instance
            pytest.fail(f"{name} is drawn without its code")


def test_the_drawing_is_read_as_a_tree() -> None:
    drawn = drawing()
    assert drawn["KilnError"] == (None, "internal_error")
    assert drawn["StoreFull"] == ("StoreError", "disk_full")
    assert drawn["ProtectedPathError"] == ("UnsafePathError", "protected_path")
    assert drawn["ExecReadTimeout"] == ("SandboxError", "exec_read_timeout")


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        pytest.param(ConfigError("no key"), "config_error", id="kiln"),
        pytest.param(DiskFull("docker: no space"), "disk_full", id="sandbox"),
        pytest.param(ProtectedPathError("node_modules/x"), "protected_path", id="parser"),
        pytest.param(KeyError("x"), "internal_error", id="a-bug"),
        pytest.param(SandboxError("x"), "sandbox_error", id="sandbox-root"),
        pytest.param(KilnError("x"), "internal_error", id="kiln-root"),
    ],
)
def test_error_code_reads_the_class_code_in_every_tree(exc: Exception, code: str) -> None:
    assert error_code(exc) == code
