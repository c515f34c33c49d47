"""What a user reads when a run fails: a stable code and a sentence, never a class name.

The agent loop reports the failures it expects (a refused command, a provider error) itself. This
module is for the rest, whatever escaped the loop: :func:`failure_of` finds the exception that
matters (the first of kiln's own inside an ``ExceptionGroup``: a task group wraps whatever its
tasks raise), takes its stable ``code`` (:func:`app.errors.error_code`) and says it in words:

- infrastructure (Docker down, Redis down, no room for another sandbox, an image not built, a
  full disk) gets a fixed sentence from :data:`SENTENCES`: the exception's own message names
  docker calls and addresses, which are for the log, not for the chat;
- kiln's other errors say what went wrong in their message, which is shown;
- anything else is a bug: ``internal_error`` and a sentence pointing at the server log.

Docker, Redis and database exceptions are mapped once, where kiln calls them
(sandbox/docker_boundary.py, sandbox/redis_boundary.py, app/store/sqlite_db.py and
postgres_db.py): they arrive
here as kiln's own, with their code. The one raw error recognised is a full disk (``ENOSPC``):
any file write can meet it, there is no single boundary for it.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from app.agent.loop import RunResult
from app.error_codes import ERROR_CODES, INTERNAL
from app.errors import ROOTS, error_code

# The codes whose run shows a fixed sentence (declared with their words in app.error_codes).
SENTENCES: dict[str, str] = {e.code: e.sentence for e in ERROR_CODES if e.sentence}


# A run that ended ``failed`` without a fatal error (its ``stop_reason`` is the code): why.
UNFINISHED: dict[str, str] = {
    "no_output": (
        "The model gave no usable answer: no files, no command and no question. "
        "Try saying what to build or change."
    ),
    "context_limit_exceeded": (
        "This conversation no longer fits the model's context window. "
        "Start a new chat to go on (the project's files can be downloaded from Versions)."
    ),
    "error": "The run failed; the errors above say why.",
}
LINE_LIMIT = 300  # characters of a build's error line quoted in the run's error


def unfinished_reason(result: RunResult) -> str | None:
    """Why ``result`` failed, in words, when no fatal error says it (``None`` otherwise)."""
    if result.status != "failed":
        return None
    build, findings = result.build, (result.postgen or {}).get("findings") or []
    if build is not None and not build.get("ok"):
        return f"The app does not build, even after the fix-up turns: {_error_line(build)}"
    if findings:
        first = findings[0]
        more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
        return f"The app still has a problem in {first['path']!r}: {first['message']}{more}"
    return UNFINISHED.get(result.stop_reason, UNFINISHED["error"])


def _error_line(build: Mapping[str, Any]) -> str:
    """The line of a build's output that says what is wrong (the first naming an error)."""
    lines = [line.strip() for line in str(build.get("output") or "").splitlines() if line.strip()]
    named = next((line for line in lines if "error" in line.lower()), None)
    line = named or (lines[-1] if lines else f"it exited with {build.get('exit_code')}")
    return line[:LINE_LIMIT]


@dataclass(frozen=True, slots=True)
class Failure:
    """A failed run as the user sees it: ``code`` and ``message``."""

    code: str
    message: str


def failure_of(exc: BaseException) -> Failure:
    """The code and words of a run that failed with ``exc``."""
    leaf = _deciding(exc)
    code = _outage(leaf) or error_code(leaf)
    if code in SENTENCES:
        return Failure(code, SENTENCES[code])
    if isinstance(leaf, ROOTS):
        return Failure(code, str(leaf))
    return Failure(INTERNAL, SENTENCES[INTERNAL])


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions inside ``exc``'s (nested) groups, in order; ``exc`` if it is none."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def _deciding(exc: BaseException) -> BaseException:
    """The first exception with a known outage or from kiln's trees, else the first at all."""
    leaves = list(_leaves(exc))
    known = (leaf for leaf in leaves if _outage(leaf) or isinstance(leaf, ROOTS))
    return next(known, leaves[0])


def _outage(exc: BaseException) -> str | None:
    """``disk_full`` when ``exc`` or one of its causes is the OS's full disk, else ``None``."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno == errno.ENOSPC:
            return "disk_full"
        seen = seen.__cause__
    return None
