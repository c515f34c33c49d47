"""The one reader of environment settings: types, ranges, and refusals that name the value."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sandbox.env_settings import EnvReader
from sandbox.errors import SandboxConfigError, SandboxError


class OtherLayersError(Exception):
    """Stands in for ``app.errors.ConfigError`` (sandbox tests do not import app)."""


def read(**env: str) -> EnvReader:
    return EnvReader(env)


@pytest.mark.parametrize(
    "value",
    [pytest.param(None, id="unset"), pytest.param("", id="empty"), pytest.param("  ", id="blank")],
)
def test_unset_or_blank_gives_the_default(value: str | None) -> None:
    reader = read() if value is None else read(X=value)
    assert reader.integer("X", 7, low=1) == 7
    assert reader.number("X", 2.5) == 2.5
    assert reader.size("X", "1g") == "1g"
    assert reader.boolean("X", True) is True
    assert reader.text("X", "d") == "d"
    assert reader.path("X", Path("/d")) == Path("/d")
    assert reader.optional_path("X") is None
    assert reader.raw("X") is None


def test_values_are_read_with_their_types(tmp_path: Path) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("pem")
    reader = read(
        I=" 42 ", N="0.25", S="512M", B="Yes", T=" name ", P="~/kiln", F=str(bundle), L="a, ,b"
    )
    assert reader.integer("I", 1, low=1, high=100) == 42
    assert reader.number("N", 1.0) == 0.25
    assert reader.size("S", "1g") == "512m"
    assert reader.boolean("B", False) is True
    assert reader.text("T", "") == "name"
    assert reader.path("P", Path("/d")) == Path.home() / "kiln"
    assert reader.optional_path("P") == Path.home() / "kiln"
    assert reader.optional_file("F", None) == bundle
    assert reader.names("L", ()) == ("a", "b")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("-5", "X='-5' must be an integer >= 1", id="below"),
        pytest.param("0", "X='0' must be an integer >= 1", id="zero"),
        pytest.param("2.0", "X='2.0' must be an integer >= 1", id="not-whole"),
        pytest.param("inf", "X='inf' must be an integer >= 1", id="inf"),
        pytest.param("lots", "X='lots' must be an integer >= 1", id="word"),
    ],
)
def test_a_bad_integer_is_refused_naming_variable_value_and_range(value: str, message: str) -> None:
    with pytest.raises(SandboxConfigError, match=f"^{re.escape(message)}$"):
        read(X=value).integer("X", 1, low=1)


@pytest.mark.parametrize(
    ("value", "kwargs", "message"),
    [
        pytest.param("inf", {}, "X='inf' must be a finite number > 0", id="inf"),
        pytest.param("-inf", {}, "X='-inf' must be a finite number > 0", id="minus-inf"),
        pytest.param("nan", {}, "X='nan' must be a finite number > 0", id="nan"),
        pytest.param("0", {}, "X='0' must be a finite number > 0", id="zero-open"),
        pytest.param("-1", {"low_open": False}, "X='-1' must be a finite number >= 0", id="neg"),
        pytest.param(
            "2", {"low": 0.5, "high": 1}, "X='2' must be a finite number > 0.5 and <= 1", id="high"
        ),
        pytest.param("soon", {}, "X='soon' must be a finite number > 0", id="word"),
    ],
)
def test_a_bad_number_is_refused(value: str, kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(SandboxConfigError, match=f"^{re.escape(message)}$"):
        read(X=value).number("X", 1.0, **kwargs)  # type: ignore[arg-type]


def test_zero_is_allowed_when_the_low_bound_is_closed() -> None:
    assert read(X="0").number("X", 1.0, low_open=False) == 0.0
    assert read(X="0").integer("X", 1, low=0) == 0


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("1t", id="unit"),
        pytest.param("0g", id="zero"),
        pytest.param("-1g", id="negative"),
        pytest.param("g", id="no-amount"),
        pytest.param("infm", id="inf"),
        pytest.param("1 g", id="space"),
    ],
)
def test_a_bad_size_is_refused(value: str) -> None:
    with pytest.raises(SandboxConfigError, match=f"^X={re.escape(repr(value))} must be a size"):
        read(X=value).size("X", "1g")


def test_a_size_below_the_floor_is_refused() -> None:
    assert read(X="6M").size("X", "1g", low="6m") == "6m"
    with pytest.raises(SandboxConfigError, match=r"^X='5m' must be a size .*, at least 6m$"):
        read(X="5m").size("X", "1g", low="6m")


def test_a_bad_boolean_is_refused() -> None:
    with pytest.raises(SandboxConfigError, match=r"^X='maybe' must be a boolean"):
        read(X="maybe").boolean("X", False)


def test_a_choice_is_one_of_its_words_in_any_case() -> None:
    assert read(X=" Blue ").choice("X", "red", ("red", "blue")) == "blue"
    assert read().choice("X", "red", ("red", "blue")) == "red"
    with pytest.raises(SandboxConfigError, match=r"^X='green' must be one of red, blue$"):
        read(X="green").choice("X", "red", ("red", "blue"))


def test_a_named_file_must_exist_and_empty_means_none(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(
        SandboxConfigError, match=re.escape(f"X={str(missing)!r} must be a readable")
    ):
        read(X=str(missing)).optional_file("X", None)
    with pytest.raises(SandboxConfigError, match="must be a readable file"):
        read(X=str(tmp_path)).optional_file("X", None)  # a folder is not a file
    assert read(X="").optional_file("X", tmp_path) is None
    assert read().optional_file("X", tmp_path) == tmp_path


def test_an_explicit_empty_list_is_empty() -> None:
    assert read(L="").names("L", ("a",)) == ()
    assert read().names("L", ("a",)) == ("a",)


def test_each_layer_refuses_with_its_own_error_class() -> None:
    with pytest.raises(OtherLayersError, match="X='x'"):
        EnvReader({"X": "x"}, OtherLayersError).integer("X", 1)


def test_the_sandbox_config_error_is_in_the_tree_and_a_value_error() -> None:
    assert issubclass(SandboxConfigError, SandboxError)
    assert issubclass(SandboxConfigError, ValueError)  # the CLI maps those to exit code 2
    assert SandboxConfigError.code == "config_error"
