"""The one wrapper of redis-py's exceptions: outages, failures and a refused password."""

from __future__ import annotations

import pytest
import redis.exceptions

from app.runs.errors import QueueUnavailable
from sandbox import RedisAuthFailed, RedisUnavailable, SandboxUnavailable, wrap_redis_errors


@pytest.mark.parametrize(
    ("raised", "unreachable", "expected", "words"),
    [
        pytest.param(
            redis.exceptions.AuthenticationError("invalid username-password pair"),
            RedisUnavailable,
            RedisAuthFailed,
            "redis refused the password while reading",
            id="password-refused",
        ),
        pytest.param(
            redis.exceptions.AuthenticationError("Authentication required."),
            SandboxUnavailable,
            RedisAuthFailed,
            "KILN_REDIS_PASSWORD_FILE",
            id="a-base-class-takes-it-too",
        ),
        pytest.param(
            redis.exceptions.AuthenticationError("invalid username-password pair"),
            QueueUnavailable,
            QueueUnavailable,
            "redis refused the password while reading",
            id="a-callers-own-class-is-kept",
        ),
        pytest.param(
            redis.exceptions.ConnectionError("Connection refused"),
            RedisUnavailable,
            RedisUnavailable,
            "redis unreachable while reading",
            id="an-outage-stays-one",
        ),
    ],
)
def test_failures_become_the_callers_classes(
    raised: Exception, unreachable: type[Exception], expected: type[Exception], words: str
) -> None:
    with (
        pytest.raises(expected, match=words) as caught,
        wrap_redis_errors("reading", unreachable=unreachable),
    ):
        raise raised
    assert type(caught.value) is expected
    assert caught.value.__cause__ is raised


def test_a_refused_password_has_its_own_code() -> None:
    assert RedisAuthFailed.code == "redis_auth_failed"
    assert issubclass(RedisAuthFailed, RedisUnavailable)  # callers of outages take it too
