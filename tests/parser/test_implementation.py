"""Which parser this run loaded: the one ``app.parser_choice`` picked (``make test`` runs
tests/parser under both ``KILN_PARSER=compiled`` and ``KILN_PARSER=python``)."""

from __future__ import annotations

import os
from pathlib import Path

import parser
import parser.stream
import parser.tags
from app.parser_choice import activate, implementation_of


def test_every_parser_module_is_the_implementation_kiln_picked() -> None:
    choice = activate()  # tests/conftest.py made the choice; this returns it
    for module in (parser, parser.stream, parser.tags):
        assert implementation_of(module.__file__) == choice.implementation, module.__file__
    if choice.build_dir is not None:
        assert Path(str(parser.stream.__file__)).parents[1] == choice.build_dir


def test_a_forced_implementation_is_the_one_loaded() -> None:
    forced = os.environ.get("KILN_PARSER", "auto").strip().lower() or "auto"
    suffix = {"compiled": ".so", "python": ".py"}.get(forced)
    if suffix is None:  # auto: whatever is fresh, checked above
        suffix = ".so" if activate().implementation == "compiled" else ".py"
    assert str(parser.stream.__file__).endswith(suffix)
