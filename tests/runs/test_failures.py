"""What a failed run shows: a stable code and a sentence, found inside exception groups."""

from __future__ import annotations

import errno
import sqlite3
from typing import Any

import docker.errors
import pytest
import redis.exceptions

from app.agent.loop import RunResult
from app.errors import ConfigError
from app.runs.failures import (
    INTERNAL,
    SENTENCES,
    UNFINISHED,
    Failure,
    failure_of,
    unfinished_reason,
)
from app.store import StoreError, StoreFull
from sandbox.errors import DockerUnavailable, RedisUnavailable, SandboxCapacity, SandboxError


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
        pytest.param(StoreFull("the store failed: disk is full"), "disk_full", id="store-full"),
        pytest.param(StoreError("the store failed: locked"), "store_error", id="store"),
        pytest.param(OSError(errno.ENOSPC, "No space left"), "disk_full", id="enospc"),
        pytest.param(
            _caused(DockerUnavailable("docker: down"), OSError(errno.ENOSPC, "No space left")),
            "disk_full",
            id="enospc-cause",
        ),
        pytest.param(RedisUnavailable("redis: down"), "redis_unavailable", id="redis"),
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
        # Wrapped at their boundaries (redis_boundary, docker_boundary, the store): one that
        # arrives raw is a missed wrapper, a bug to fix there, not an outage guessed here.
        pytest.param(redis.exceptions.ConnectionError("Error 111"), id="raw-redis"),
        pytest.param(docker.errors.DockerException("no engine"), id="raw-docker"),
        pytest.param(sqlite3.OperationalError("database or disk is full"), id="raw-sqlite"),
    ],
)
def test_a_bug_is_an_internal_error_without_its_class_name(error: Exception) -> None:
    failure = failure_of(error)
    assert failure == Failure(INTERNAL, SENTENCES[INTERNAL])
    for internal in ("RuntimeError", "KeyError", "TaskGroup", "Traceback"):
        assert internal not in failure.message


def _result(
    status: str,
    stop_reason: str,
    build: dict[str, Any] | None = None,
    findings: list[dict[str, Any]] | None = None,
) -> RunResult:
    postgen = {"fixes": [], "findings": findings or [], "build": build}
    return RunResult(status, stop_reason, 2, [], [], [], build, postgen, None, None, {}, [])


FAILED_BUILD = {
    "ok": False,
    "exit_code": 1,
    "output": "vite v5 building for production...\n"
    '[vite:esbuild] Transform failed with 1 error: src/App.jsx:3:9: ERROR: Expected ">"\n'
    "    at failureErrorWithLog (node_modules/esbuild/lib/main.js:1472:15)",
}


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        pytest.param(_result("completed", "code_written"), None, id="completed"),
        pytest.param(_result("cancelled", "cancelled"), None, id="cancelled"),
        pytest.param(
            _result("failed", "code_written", FAILED_BUILD),
            "The app does not build, even after the fix-up turns: [vite:esbuild] Transform "
            'failed with 1 error: src/App.jsx:3:9: ERROR: Expected ">"',
            id="build-failed",
        ),
        pytest.param(
            _result("failed", "code_written", {"ok": False, "exit_code": 2, "output": ""}),
            "The app does not build, even after the fix-up turns: it exited with 2",
            id="build-failed-silently",
        ),
        pytest.param(
            _result(
                "failed",
                "code_written",
                {"ok": True, "exit_code": 0, "output": ""},
                [
                    {"code": "missing_import", "path": "src/App.jsx", "line": 1, "message": "x"},
                    {"code": "missing_import", "path": "src/B.jsx", "line": 1, "message": "y"},
                ],
            ),
            "The app still has a problem in 'src/App.jsx': x (and 1 more)",
            id="findings-left",
        ),
        pytest.param(_result("failed", "no_output"), UNFINISHED["no_output"], id="no-output"),
        pytest.param(
            _result("failed", "context_limit_exceeded"),
            UNFINISHED["context_limit_exceeded"],
            id="context",
        ),
        pytest.param(_result("failed", "error"), UNFINISHED["error"], id="other"),
    ],
)
def test_a_failed_run_without_a_fatal_error_still_says_why(
    result: RunResult, expected: str | None
) -> None:
    assert unfinished_reason(result) == expected
