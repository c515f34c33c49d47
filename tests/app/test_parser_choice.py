"""The parser's implementation: compiled when a build of the current sources exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.errors import ConfigError
from app.parser_choice import (
    BUILD_COMMAND,
    COMPLETE_MARK,
    build_key,
    build_root,
    choose,
    implementation_of,
)


@pytest.fixture
def sources(tmp_path: Path) -> Path:
    """A stand-in for ``parser/``: two modules."""
    folder = tmp_path / "parser"
    folder.mkdir()
    (folder / "__init__.py").write_text('"""p."""\n')
    (folder / "stream.py").write_text("X = 1\n")
    return folder


def make_build(sources: Path) -> Path:
    """A finished build of the current sources (its folder and completion mark)."""
    folder = build_root(sources) / build_key(sources)
    (folder / "parser").mkdir(parents=True)
    (folder / COMPLETE_MARK).write_text("done\n")
    return folder


def test_the_key_follows_every_source_byte_and_name(sources: Path) -> None:
    first = build_key(sources)
    assert build_key(sources) == first
    (sources / "stream.py").write_text("X = 2\n")
    second = build_key(sources)
    (sources / "stream.py").rename(sources / "other.py")
    assert len({first, second, build_key(sources)}) == 3


def test_without_a_build_auto_is_pure_python(sources: Path) -> None:
    choice = choose({}, sources)
    assert (choice.implementation, choice.stale) == ("python", False)
    assert choice.reason == "no compiled parser is built"


def test_a_fresh_build_is_used_unless_python_is_forced(sources: Path) -> None:
    build = make_build(sources)
    assert choose({}, sources).build_dir == build
    assert choose({"KILN_PARSER": "Compiled"}, sources).implementation == "compiled"
    forced = choose({"KILN_PARSER": "python"}, sources)
    assert (forced.implementation, forced.build_dir) == ("python", None)


def test_an_unfinished_build_is_not_used(sources: Path) -> None:
    (make_build(sources) / COMPLETE_MARK).unlink()
    assert choose({}, sources).implementation == "python"


def test_a_changed_source_makes_the_build_stale(sources: Path) -> None:
    make_build(sources)
    (sources / "stream.py").write_text("X = 3\n")
    choice = choose({}, sources)
    assert (choice.implementation, choice.stale, choice.build_dir) == ("python", True, None)
    with pytest.raises(ConfigError, match="stale") as raised:
        choose({"KILN_PARSER": "compiled"}, sources)
    assert raised.value.code == "config_error"


def test_compiled_without_a_build_names_the_setting_and_the_build(sources: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        choose({"KILN_PARSER": "compiled"}, sources)
    assert "KILN_PARSER=compiled" in str(raised.value)
    assert BUILD_COMMAND in str(raised.value)


def test_an_unknown_value_is_refused(sources: Path) -> None:
    with pytest.raises(ConfigError, match="KILN_PARSER='cython' must be one of auto"):
        choose({"KILN_PARSER": "cython"}, sources)


def test_extension_modules_are_the_compiled_implementation() -> None:
    assert implementation_of("/b/parser/stream.cpython-311-x86_64-linux-gnu.so") == "compiled"
    assert implementation_of("/c/parser/stream.py") == "python"
    assert implementation_of(None) == "python"
