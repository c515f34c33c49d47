"""kiln's retry policy and Retry-After parsing, without any sleeping."""

from __future__ import annotations

import email.utils

import pytest

from app.errors import (
    AuthError,
    ContextTooLong,
    ModelRefused,
    Overloaded,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
)
from app.providers.retry import RetryPolicy, retry_after_seconds


def policy(draw: float, **changes: float) -> RetryPolicy:
    settings = {"max_attempts": 5, "base_delay": 1.0, "max_delay": 20.0, "jitter": 0.25} | changes
    return RetryPolicy(
        max_attempts=int(settings["max_attempts"]),
        base_delay=settings["base_delay"],
        max_delay=settings["max_delay"],
        jitter=settings["jitter"],
        random_fraction=lambda: draw,
    )


@pytest.mark.parametrize(
    ("attempts_made", "expected"),
    [
        pytest.param(1, 1.0, id="first-retry"),
        pytest.param(2, 2.0, id="second"),
        pytest.param(3, 4.0, id="third"),
        pytest.param(4, 8.0, id="fourth"),
    ],
)
def test_back_off_doubles(attempts_made: int, expected: float) -> None:
    delay = policy(0.5).delay_before_retry(Overloaded("busy"), attempts_made)
    assert delay == expected


def test_back_off_is_capped() -> None:
    assert policy(0.5, max_attempts=20).delay_before_retry(Overloaded("busy"), 10) == 20.0


@pytest.mark.parametrize(
    ("draw", "expected"),
    [pytest.param(0.0, 3.0, id="lowest"), pytest.param(1.0, 5.0, id="highest")],
)
def test_jitter_spreads_back_off(draw: float, expected: float) -> None:
    assert policy(draw).delay_before_retry(ProviderUnavailable("down"), 3) == expected


@pytest.mark.parametrize(
    ("draw", "expected"),
    [
        pytest.param(0.0, 7.0, id="never-sooner"),
        pytest.param(1.0, 8.75, id="at-most-a-quarter-more"),
    ],
)
def test_retry_after_is_honoured_with_upward_jitter(draw: float, expected: float) -> None:
    assert policy(draw).delay_before_retry(RateLimited("slow", 7.0), 1) == expected


def test_retry_after_too_long_gives_up() -> None:
    assert policy(0.5).delay_before_retry(RateLimited("slow", 600.0), 1) is None


def test_rate_limit_without_retry_after_backs_off() -> None:
    assert policy(0.5).delay_before_retry(RateLimited("slow"), 2) == 2.0


def test_attempts_are_bounded() -> None:
    assert policy(0.5, max_attempts=3).delay_before_retry(Overloaded("busy"), 3) is None


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(AuthError("key"), id="auth"),
        pytest.param(ContextTooLong("long"), id="context"),
        pytest.param(ModelRefused("model"), id="model"),
        pytest.param(ProviderError("other"), id="other"),
    ],
)
def test_permanent_errors_get_no_retry(error: ProviderError) -> None:
    assert policy(0.5).delay_before_retry(error, 1) is None


@pytest.mark.parametrize(
    "settings",
    [
        pytest.param({"max_attempts": 0}, id="no-attempts"),
        pytest.param({"jitter": 1.0}, id="jitter"),
    ],
)
def test_policy_rejects_nonsense(settings: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must be"):
        RetryPolicy(**settings)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        pytest.param({"retry-after": "7"}, 7.0, id="seconds"),
        pytest.param({"retry-after": "1.5"}, 1.5, id="fraction"),
        pytest.param({"retry-after-ms": "250", "retry-after": "7"}, 0.25, id="ms-wins"),
        pytest.param({"retry-after": "soon"}, None, id="garbage"),
        pytest.param({"retry-after": "-3"}, None, id="negative"),
        pytest.param({"retry-after": "nan"}, None, id="nan"),
        pytest.param({}, None, id="absent"),
    ],
)
def test_retry_after_header(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after_seconds(headers) == expected


def test_retry_after_http_date() -> None:
    now = 1_700_000_000.0
    later = email.utils.formatdate(now + 30, usegmt=True)
    assert retry_after_seconds({"retry-after": later}, now=now) == 30.0
    earlier = email.utils.formatdate(now - 30, usegmt=True)
    assert retry_after_seconds({"retry-after": earlier}, now=now) == 0.0
