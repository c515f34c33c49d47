"""Which workspace files are a project's, which paths are safe, and the size cap."""

from __future__ import annotations

import pytest

from app.projects.errors import ProjectTooLarge
from app.projects.rules import check_size, is_source, safe_path, unkeepable_name


@pytest.mark.parametrize(
    ("path", "kept"),
    [
        pytest.param("src/App.jsx", True, id="source"),
        pytest.param("package.json", True, id="manifest"),
        pytest.param("package-lock.json", True, id="lock-file"),
        pytest.param("node_modules/react/index.js", False, id="installed-packages"),
        pytest.param("packages/ui/node_modules/x.js", False, id="nested-node-modules"),
        pytest.param("dist/index.html", False, id="vite-build"),
        pytest.param(".next/server/page.js", False, id="next-build"),
        pytest.param("build/app.js", False, id="build-folder"),
        pytest.param(".vite/deps/react.js", False, id="vite-cache"),
        pytest.param("npm-debug.log", False, id="log"),
        pytest.param(
            "vite.config.js.timestamp-1795525354000-4f2a9c1d.mjs", False, id="vite-config-bundle"
        ),
        pytest.param("src/release.timestamp.js", True, id="not-a-config-bundle"),
        pytest.param(".kiln/version", False, id="kilns-marker"),
        pytest.param("src/build.js", True, id="file-named-like-a-folder"),
    ],
)
def test_the_rule_set_keeps_sources_only(path: str, kept: bool) -> None:
    assert is_source(path) is kept


@pytest.mark.parametrize(
    ("path", "clean"),
    [
        pytest.param("./src/App.jsx", "src/App.jsx", id="tar-prefix"),
        pytest.param("src/App.jsx", "src/App.jsx", id="plain"),
        pytest.param("/etc/passwd", None, id="absolute"),
        pytest.param("../outside.txt", None, id="climbs-out"),
        pytest.param("src/../../x", None, id="climbs-out-later"),
        pytest.param("a//b", None, id="empty-component"),
        pytest.param("odd\nname", "odd\nname", id="newline"),
        pytest.param('./quo"te', 'quo"te', id="quote"),
        pytest.param("back\\slash\tand tab", "back\\slash\tand tab", id="backslash-tab"),
        pytest.param("nul\0", None, id="nul"),
        pytest.param("", None, id="empty"),
    ],
)
def test_safe_path(path: str, clean: str | None) -> None:
    assert safe_path(path) == clean


@pytest.mark.parametrize(
    ("path", "unkeepable"),
    [
        pytest.param('src/"q"\\\t\n.js', False, id="any-character"),
        pytest.param("src/grüß.js", False, id="utf-8"),
        pytest.param(b"src/\xff.js".decode("utf-8", "surrogateescape"), True, id="not-utf-8"),
    ],
)
def test_a_name_that_is_not_utf8_cannot_be_kept(path: str, unkeepable: bool) -> None:
    assert unkeepable_name(path) is unkeepable


def test_a_project_over_the_cap_names_its_largest_files() -> None:
    files = {"a.txt": b"x" * 10, "big.bin": b"x" * 600, "mid.js": b"x" * 300, "s": b""}
    with pytest.raises(ProjectTooLarge) as raised:
        check_size(files, 500)
    message = str(raised.value)
    assert "910 bytes, over the cap of 500" in message
    assert message.index("'big.bin' (600 bytes)") < message.index("'mid.js' (300 bytes)")
    assert raised.value.code == "project_too_large"


def test_a_project_at_the_cap_passes() -> None:
    check_size({"a": b"x" * 500}, 500)
