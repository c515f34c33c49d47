"""What publishing raises, below :class:`~app.errors.KilnError` (drawn in app/errors.py).

The publish API maps them: ``not_published`` 404, ``publish_unsupported`` 422,
``publish_too_large`` 413, ``publish_build_failed`` 422, ``publish_timeout`` 504, any other
``publish_failed`` 503.
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


class NotPublished(PublishError):
    """The chat has no live link."""

    code = "not_published"
