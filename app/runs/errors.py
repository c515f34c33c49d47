"""What the runs machinery raises, below :class:`~app.errors.KilnError`.

The HTTP layer maps ``code`` to a status: ``not_found`` 404, ``run_finished`` 409,
``invalid_request`` 400, ``queue_unavailable`` 503. :class:`~app.errors.AdmissionRefused`
(429), :class:`~app.errors.ConfigError` and :class:`~app.errors.ModelRefused` (400, a provider
or model that cannot be used) come from :mod:`app.errors`.
"""

from __future__ import annotations

import contextlib

from app.errors import KilnError
from sandbox import wrap_redis_errors


class RunNotFound(KilnError):
    """No such run or chat, or one of another user (the two are not told apart)."""

    code = "not_found"


class RunFinished(KilnError):
    """The run has already ended; it cannot be cancelled."""

    code = "run_finished"


class InvalidRunRequest(KilnError):
    """A message that cannot become a run (empty content, unknown template)."""

    code = "invalid_request"


class QueueUnavailable(KilnError):
    """Redis (queue, admission counters, event channels) cannot be reached."""

    code = "queue_unavailable"


def redis_errors(action: str) -> contextlib.AbstractContextManager[None]:
    """Raise redis-py failures during ``action`` as :class:`QueueUnavailable`."""
    return wrap_redis_errors(action, unreachable=QueueUnavailable)
