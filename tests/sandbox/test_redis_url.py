"""REDIS_URL and its password file: one rule for every client, and the URL printed redacted."""

from __future__ import annotations

from pathlib import Path

import pytest
from redis.connection import parse_url

from sandbox import EnvReader, SandboxConfigError, redacted_url, redis_url_from_env
from sandbox.redis_url import with_password

PASSWORD = "p@ss/w:rd%20 é"


def resolved(env: dict[str, str]) -> str | None:
    return redis_url_from_env(EnvReader(env))


@pytest.fixture
def password_file(tmp_path: Path) -> Path:
    path = tmp_path / "redis_password"
    path.write_text(PASSWORD + "\n")  # as `echo ... > file` writes it
    return path


@pytest.mark.parametrize(
    ("url", "user"),
    [
        pytest.param("redis://10.0.0.5:6379/0", None, id="no-user"),
        pytest.param("redis://kiln@10.0.0.5:6379/0", "kiln", id="acl-user-kept"),
        pytest.param("rediss://10.0.0.5:6380/1", None, id="tls"),
    ],
)
def test_the_files_password_goes_into_the_url(password_file: Path, url: str, user: str) -> None:
    got = resolved({"REDIS_URL": url, "KILN_REDIS_PASSWORD_FILE": str(password_file)})
    assert got is not None
    # What redis-py (every client kiln makes) reads out of it.
    assert parse_url(got)["password"] == PASSWORD
    assert parse_url(got).get("username") == user
    assert parse_url(got)["host"] == "10.0.0.5"


def test_without_the_file_the_url_is_as_given() -> None:
    assert resolved({"REDIS_URL": " redis://:pw@h/0 "}) == "redis://:pw@h/0"
    assert resolved({}) is None  # the embedded Redis


@pytest.mark.parametrize(
    ("env", "words"),
    [
        pytest.param(
            {"REDIS_URL": "redis://:hunter2@h/0"}, "holds a password and", id="two-passwords"
        ),
        pytest.param(
            {"REDIS_URL": "redis://h/0?password=hunter2"}, "holds a password and", id="query-pw"
        ),
        pytest.param({}, "REDIS_URL is not", id="embedded-takes-none"),
    ],
)
def test_an_ambiguous_setting_is_refused_in_words(
    password_file: Path, env: dict[str, str], words: str
) -> None:
    with pytest.raises(SandboxConfigError, match=words) as refused:
        resolved({**env, "KILN_REDIS_PASSWORD_FILE": str(password_file)})
    assert "hunter2" not in str(refused.value)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        pytest.param(None, "cannot be read", id="missing"),
        pytest.param("\n", "is empty", id="empty"),
    ],
)
def test_a_password_file_without_a_password_is_refused(
    tmp_path: Path, content: str | None, words: str
) -> None:
    path = tmp_path / "pw"
    if content is not None:
        path.write_text(content)
    env = {"REDIS_URL": "redis://h/0", "KILN_REDIS_PASSWORD_FILE": str(path)}
    with pytest.raises(SandboxConfigError, match=words):
        resolved(env)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        pytest.param("redis://:s3cret@h:6379/0", "redis://:***@h:6379/0", id="password"),
        pytest.param("rediss://kiln:s3cret@h/0", "rediss://kiln:***@h/0", id="user"),
        pytest.param("redis://h/0?password=s3cret&db=1", "redis://h/0?password=***&db=1", id="q"),
        pytest.param("redis://kiln@h/0", "redis://kiln@h/0", id="user-alone"),
        pytest.param("unix:///run/redis.sock?db=0", "unix:///run/redis.sock?db=0", id="unix"),
    ],
)
def test_the_printed_url_hides_the_password(url: str, shown: str) -> None:
    assert redacted_url(url) == shown
    assert redacted_url(with_password("redis://h/0", PASSWORD)) == "redis://:***@h/0"
