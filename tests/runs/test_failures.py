"""What a failed run shows: a stable code and a sentence, found inside exception groups."""

from __future__ import annotations

import errno
import sqlite3

import pytest
import redis.exceptions

from app.errors import ConfigError
from app.runs.failures import INTERNAL, SENTENCES, Failure, failure_of
from app.store import StoreError
from sandbox.errors import DockerUnavailable, SandboxCapacity, SandboxError


def _group(*exceptions: Exception) -> ExceptionGroup:
    """What anyio's task group raises when its tasks fail."""
    return ExceptionGroup("unhandled errors in a TaskGroup", list(exceptions))


def _caused(exc: Exception, cause: BaseException) -> Exception:
    exc.__cause__ = cause
    return exc


@pytest.mark.parametrize(
    ("error", "code"),
    [
        pytest.param(_group(SandboxCapacity("docker: x failed")), "sandbox_capacity", id="group"),
        pytest.param(
            _group(_group(RuntimeError("a bug"), DockerUnavailable("docker: down"))),
            "docker_unavailable",
            id="nested-group-kiln-error-wins-over-a-bug",
        ),
        pytest.param(
            _caused(
                StoreError("the database failed"),
                sqlite3.OperationalError("database or disk is full"),
            ),
            "disk_full",
            id="store-disk-full",
        ),
        pytest.param(OSError(errno.ENOSPC, "No space left"), "disk_full", id="enospc"),
        pytest.param(
            redis.exceptions.ConnectionError("Error 111"), "redis_unavailable", id="raw-redis"
        ),
        pytest.param(
            SandboxError("docker: create failed: 'Conflict'"), "sandbox_error", id="other"
        ),
    ],
)
def test_infrastructure_failures_read_as_their_code_s_sentence(error: Exception, code: str) -> None:
    assert failure_of(error) == Failure(code, SENTENCES[code])


def test_kiln_errors_meant_for_users_keep_their_message() -> None:
    failure = failure_of(_group(ConfigError("no API key for 'openai': set OPENAI_API_KEY")))
    assert failure == Failure("config_error", "no API key for 'openai': set OPENAI_API_KEY")


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(RuntimeError("boom"), id="bug"),
        pytest.param(_group(KeyError("x")), id="bug-in-a-group"),
    ],
)
def test_a_bug_is_an_internal_error_without_its_class_name(error: Exception) -> None:
    failure = failure_of(error)
    assert failure == Failure(INTERNAL, SENTENCES[INTERNAL])
    for internal in ("RuntimeError", "KeyError", "TaskGroup", "Traceback"):
        assert internal not in failure.message
