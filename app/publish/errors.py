"""What publishing raises, below :class:`~app.errors.KilnError` (drawn in app/errors.py).

The publish API maps them: ``not_published`` 404, ``publish_unsupported`` 422,
``publish_too_large`` 413, ``publish_build_failed`` 422, ``publish_timeout`` 504,
``publish_in_progress`` 409, ``publish_rate_limited`` 429 (with ``Retry-After``), any other
``publish_failed`` 503. A background publish that fails keeps its code and words in its job.
"""

from __future__ import annotations

from app.errors import KilnError


class PublishError(KilnError):
    """A version could not be published (the build's storage or sandbox failed)."""

    code = "publish_failed"


class PublishUnsupported(PublishError):
    """The version's template cannot be served as static files (a Next.js app)."""

    code = "publish_unsupported"


class PublishBuildFailed(PublishError):
    """The version's production build failed; the message ends with the build's last lines."""

    code = "publish_build_failed"


class PublishTooLarge(PublishError):
    """The build's output is over the size cap (``KILN_PUBLISH_MAX_BYTES``)."""

    code = "publish_too_large"


class PublishTimeout(PublishError):
    """The build took longer than ``KILN_PUBLISH_BUILD_SECONDS``."""

    code = "publish_timeout"


class PublishBusy(PublishError):
    """The chat has a publish running: one at a time per chat."""

    code = "publish_in_progress"


class PublishRateLimited(PublishError):
    """The user started ``KILN_PUBLISH_PER_HOUR`` publishes in the last hour; ``retry_after``:
    whole seconds until one more may start."""

    code = "publish_rate_limited"

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PublishInterrupted(PublishError):
    """The server running the publish stopped (or died) before it ended."""

    code = "publish_interrupted"


class NotPublished(PublishError):
    """The chat has no live link."""

    code = "not_published"
