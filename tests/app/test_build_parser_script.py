"""scripts/build_parser.py's kept builds: a fresh clone of the same sources installs the build
kept outside the checkout instead of compiling again."""

from __future__ import annotations

import importlib.util
import sys
from importlib import metadata
from pathlib import Path
from types import ModuleType

import pytest

from app.parser_choice import COMPLETE_MARK

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "build_parser.py"
KEY = "0123456789abcdef01234567"


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_parser_script", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _a_build(folder: Path) -> Path:
    (folder / "parser").mkdir(parents=True)
    (folder / "parser" / "tokenizer.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    (folder / "abc__mypyc.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    (folder / COMPLETE_MARK).write_text(f"{KEY}\n")
    return folder


@pytest.mark.parametrize(
    ("environ", "base"),
    [
        pytest.param({"XDG_CACHE_HOME": "/c", "HOME": "/h"}, "/c", id="xdg"),
        pytest.param({"HOME": "/h"}, "/h/.cache", id="home"),
    ],
)
def test_the_kept_build_is_named_by_key_and_mypyc_version(
    script: ModuleType, environ: dict[str, str], base: str
) -> None:
    kept = script.kept_build(KEY, environ)
    assert kept == Path(base, "kiln", "parser-compiled", f"{KEY}-mypy{metadata.version('mypy')}")


@pytest.mark.parametrize("environ", [{}, {"HOME": "/nonexistent"}], ids=["unset", "nonexistent"])
def test_a_user_without_a_home_has_no_kept_builds(
    script: ModuleType, environ: dict[str, str]
) -> None:
    assert script.kept_build(KEY, environ) is None


def test_a_kept_build_is_installed_whole_replacing_older_builds(
    script: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "checkout" / ".parser-compiled"
    _a_build(root / "an-older-build")
    kept = _a_build(tmp_path / "cache" / "kiln" / "parser-compiled" / f"{KEY}-mypy1")
    monkeypatch.setattr(script, "fresh_build", lambda: None)
    monkeypatch.setattr(script, "missing_toolchain", lambda: None)
    monkeypatch.setattr(script, "build_root", lambda: root)
    monkeypatch.setattr(script, "build_key", lambda: KEY)
    monkeypatch.setattr(script, "kept_build", lambda key: kept)
    monkeypatch.setattr(script, "compile_copy", _no_compiling)
    monkeypatch.setattr(sys, "argv", ["build_parser.py"])
    assert script.main() == 0
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == [KEY]
    installed = root / KEY
    assert (installed / COMPLETE_MARK).read_text() == f"{KEY}\n"
    assert (installed / "parser" / "tokenizer.cpython-311-x86_64-linux-gnu.so").is_file()
    assert (installed / "abc__mypyc.cpython-311-x86_64-linux-gnu.so").is_file()


def _no_compiling(*args: object) -> Path:
    raise AssertionError("compiled although a build of these sources was kept")


def test_a_build_is_kept_and_older_kept_builds_go(script: ModuleType, tmp_path: Path) -> None:
    target = _a_build(tmp_path / "checkout" / ".parser-compiled" / KEY)
    cache = tmp_path / "cache" / "kiln" / "parser-compiled"
    _a_build(cache / "older-mypy1")
    script.keep(target, cache / f"{KEY}-mypy1")
    assert [p.name for p in cache.iterdir()] == [f"{KEY}-mypy1"]
    assert (cache / f"{KEY}-mypy1" / COMPLETE_MARK).is_file()


def test_an_unwritable_cache_is_no_cache(
    script: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = _a_build(tmp_path / "build" / KEY)
    (tmp_path / "a-file").write_text("")
    script.keep(target, tmp_path / "a-file" / "kiln" / f"{KEY}-mypy1")  # its parent is a file
    assert "not kept" in capsys.readouterr().err
