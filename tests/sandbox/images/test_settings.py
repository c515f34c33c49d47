"""Image build settings: the Debian mirror from apt sources, npm's registry and proxies, CA."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.images.settings import (
    FALLBACK_DEBIAN_MIRROR,
    ImageBuildSettings,
    build_ca_bundle,
    configured_debian_mirror,
    parse_deb822_sources,
    parse_npm_config,
    parse_one_line_sources,
    proxy_env,
)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        pytest.param(
            "deb http://mirror.test/debian bookworm main",
            [("http://mirror.test/debian", ("bookworm",))],
            id="plain",
        ),
        pytest.param(
            "deb [arch=amd64 signed-by=/k.gpg] http://m.test/debian/ bookworm main",
            [("http://m.test/debian", ("bookworm",))],
            id="options-and-trailing-slash",
        ),
        pytest.param("deb-src http://m.test/debian bookworm main", [], id="deb-src-ignored"),
        pytest.param("# deb http://m.test/debian bookworm main", [], id="comment"),
    ],
)
def test_one_line_apt_sources(line: str, expected: list[tuple[str, tuple[str, ...]]]) -> None:
    assert list(parse_one_line_sources(line)) == expected


def test_deb822_apt_sources_skip_disabled_and_source_stanzas() -> None:
    text = (
        "Types: deb\nURIs: http://a.test/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\n\n"
        "Types: deb\nURIs: http://b.test/debian\nSuites: bookworm\nEnabled: no\n\n"
        "Types: deb-src\nURIs: http://c.test/debian\nSuites: bookworm\n"
    )
    assert list(parse_deb822_sources(text)) == [
        ("http://a.test/debian", ("bookworm", "bookworm-updates"))
    ]


def test_mirror_is_the_first_bookworm_source_of_the_apt_configuration(tmp_path: Path) -> None:
    listing = tmp_path / "sources.list.d"
    listing.mkdir()
    (listing / "a-security.sources").write_text(
        "Types: deb\nURIs: http://sec.test/debian-security\nSuites: bookworm-security\n"
    )
    (listing / "b-main.sources").write_text(
        "Types: deb\nURIs: http://main.test/debian\nSuites: bookworm\n"
    )
    (listing / "c.list.disabled-by-admin").write_text("deb http://off.test/debian bookworm main\n")
    assert configured_debian_mirror(tmp_path) == "http://main.test/debian"


def test_mirror_falls_back_without_a_bookworm_source(tmp_path: Path) -> None:
    (tmp_path / "sources.list").write_text("deb http://old.test/debian bullseye main\n")
    assert configured_debian_mirror(tmp_path) == FALLBACK_DEBIAN_MIRROR


def test_npm_config_output_gives_registry_and_proxies_as_build_args() -> None:
    output = "registry=https://npm.test/\nproxy=null\nhttps-proxy=http://p.test:3128\nnoproxy=\n"
    registry, proxies = parse_npm_config(output)
    assert registry == "https://npm.test/"
    assert proxies == {"HTTPS_PROXY": "http://p.test:3128"}


def test_proxy_variables_are_forwarded_in_either_case() -> None:
    env = {"https_proxy": "http://p.test:3128", "NO_PROXY": "localhost", "HOME": "/root"}
    assert proxy_env(env) == {"HTTPS_PROXY": "http://p.test:3128", "NO_PROXY": "localhost"}


def test_a_named_ca_bundle_must_exist(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(ValueError, match=r"nope\.pem"):
        build_ca_bundle({"KILN_SANDBOX_CA_BUNDLE": str(missing)})


def test_settings_read_the_mirror_and_images_dir_from_the_environment(tmp_path: Path) -> None:
    env = {"KILN_DEBIAN_MIRROR": "http://m.test/debian", "KILN_IMAGES_DIR": str(tmp_path)}
    settings = ImageBuildSettings.from_env(env)
    assert settings.debian_mirror == "http://m.test/debian"
    assert settings.images_dir == tmp_path
