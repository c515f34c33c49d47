"""How pip's index reaches the kiln image's build (app.deploy.pip_index)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.deploy.pip_index import (
    PipIndex,
    effective_options,
    host_pip_options,
    parse_config_list,
    remote_urls,
)

CONFIG_LIST = """\
:env:.default-timeout='180'
:env:.index-url='https://mirror.test/simple'
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.extra-index-url='file:///opt/pypi/simple https://extra.test/simple'
global.index-url='https://global.test/simple'
install.trusted-host='mirror.test'
"""


def test_config_list_lines_are_parsed_with_their_quotes_removed() -> None:
    entries = parse_config_list(CONFIG_LIST + "not a setting\n")
    assert entries[":env:.index-url"] == "https://mirror.test/simple"
    assert entries["install.trusted-host"] == "mirror.test"
    assert len(entries) == 6


def test_the_environment_wins_over_the_install_section_over_global() -> None:
    options = effective_options(parse_config_list(CONFIG_LIST))
    assert options == {
        "index-url": "https://mirror.test/simple",
        "extra-index-url": "file:///opt/pypi/simple https://extra.test/simple",
        "trusted-host": "mirror.test",
        "cert": "/etc/ssl/certs/ca-certificates.crt",
    }


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("https://a.test/simple", ("https://a.test/simple",), id="https"),
        pytest.param("file:///opt/pypi/simple", (), id="file-url"),
        pytest.param("/opt/wheels http://b.test/", ("http://b.test/",), id="path-and-http"),
        pytest.param("", (), id="empty"),
    ],
)
def test_only_indexes_a_build_container_can_reach_are_kept(
    value: str, expected: tuple[str, ...]
) -> None:
    assert remote_urls(value) == expected


def test_host_options_become_build_args(tmp_path: Path) -> None:
    cert = tmp_path / "ca.pem"
    cert.write_text("pem")
    host = {
        "index-url": "https://mirror.test/simple",
        "extra-index-url": "file:///opt/pypi/simple https://extra.test/simple",
        "trusted-host": "mirror.test extra.test",
        "cert": str(cert),
    }
    index = PipIndex.from_env({}, host)
    assert index.cert == cert
    assert index.build_args() == {
        "PIP_INDEX_URL": "https://mirror.test/simple",
        "PIP_EXTRA_INDEX_URL": "https://extra.test/simple",
        "PIP_TRUSTED_HOST": "mirror.test extra.test",
    }


def test_kiln_variables_override_the_host() -> None:
    env = {
        "KILN_PIP_INDEX_URL": "https://kiln.test/simple",
        "KILN_PIP_TRUSTED_HOST": "kiln.test",
    }
    index = PipIndex.from_env(env, {"index-url": "https://host.test/simple"})
    assert index.build_args() == {
        "PIP_INDEX_URL": "https://kiln.test/simple",
        "PIP_TRUSTED_HOST": "kiln.test",
    }


def test_nothing_configured_means_no_build_args_and_no_cert() -> None:
    index = PipIndex.from_env({}, {"cert": "/nonexistent/ca.pem"})
    assert index == PipIndex()
    assert index.build_args() == {}


def test_the_host_configuration_is_read_from_pip_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", "https://env.test/simple")
    options = host_pip_options()
    assert options["index-url"] == "https://env.test/simple"
    assert set(options) <= {"index-url", "extra-index-url", "trusted-host", "cert"}
