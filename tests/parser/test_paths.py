"""parser.paths: the one rule for file paths a stream (or the API) names."""

from __future__ import annotations

import pytest

from parser.errors import ProtectedPathError, UnsafePathError
from parser.paths import (
    MAX_COMPONENT_BYTES,
    MAX_PATH_BYTES,
    check_writable,
    normalize_file_path,
)


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        pytest.param("src/App.jsx", "src/App.jsx", id="plain"),
        pytest.param(" ./a/./b/../c.ts ", "a/c.ts", id="dots-resolved"),
        pytest.param("src\\win\\a.js", "src/win/a.js", id="backslashes"),
        pytest.param("a" * MAX_COMPONENT_BYTES, "a" * MAX_COMPONENT_BYTES, id="longest-component"),
        pytest.param("é" * 127 + "x", "é" * 127 + "x", id="longest-component-in-utf8"),
        pytest.param(
            "/".join(["d" * 255] * 16), "/".join(["d" * 255] * 16), id="longest-path-4095-bytes"
        ),
    ],
)
def test_safe_paths(raw: str, path: str) -> None:
    assert normalize_file_path(raw) == path


@pytest.mark.parametrize(
    ("raw", "mentions"),
    [
        pytest.param("a/" + "b" * 256 + "/c.js", "component longer than 255 bytes", id="component"),
        pytest.param("é" * 128, "component longer than 255 bytes", id="component-utf8-bytes"),
        pytest.param("/".join(["é" * 100] * 21), "longer than 4096 bytes", id="path-utf8-bytes"),
        pytest.param("a/" * 2100 + "b", "longer than 4096 bytes", id="path-characters"),
        pytest.param("../x", "escapes the workspace", id="parent"),
        pytest.param("a/../../x", "escapes the workspace", id="parent-after-resolving"),
        pytest.param("/etc/passwd", "absolute", id="absolute"),
        pytest.param("C:\\x.js", "absolute", id="drive"),
        pytest.param("\\\\server\\share", "absolute", id="unc"),
        pytest.param("a\x00b", "control characters", id="nul"),
        pytest.param("\ud800.js", "lone surrogates", id="lone-surrogate"),
        pytest.param("src/", "names a folder", id="folder"),
        pytest.param(".", "names a folder", id="dot"),
        pytest.param("  ", "empty file path", id="blank"),
    ],
)
def test_unsafe_paths_are_refused_with_words(raw: str, mentions: str) -> None:
    with pytest.raises(UnsafePathError, match=mentions):
        normalize_file_path(raw)


def test_overlong_path_message_is_short() -> None:
    with pytest.raises(UnsafePathError) as caught:
        normalize_file_path("x" * (MAX_PATH_BYTES + 1))
    assert len(str(caught.value)) < 200


@pytest.mark.parametrize(
    ("path", "mentions"),
    [
        pytest.param(".kiln/version", "kiln keeps its own records there", id="kilns-marker"),
        pytest.param("node_modules/react/index.js", "declare the package", id="installed"),
        pytest.param("apps/web/node_modules/x.js", "inside node_modules/", id="nested"),
        pytest.param("node_modules", "inside node_modules/", id="the-folder-itself"),
    ],
)
def test_protected_folders_are_not_written(path: str, mentions: str) -> None:
    with pytest.raises(ProtectedPathError, match=mentions) as raised:
        check_writable(path)
    assert raised.value.code == "protected_path"
    assert repr(path) in str(raised.value)


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("src/node_modules.js", id="a-file-named-like-it"),
        pytest.param(".kilnrc", id="a-prefix"),
        pytest.param("Node_Modules/x.js", id="another-case"),
    ],
)
def test_other_paths_are_writable(path: str) -> None:
    check_writable(path)
