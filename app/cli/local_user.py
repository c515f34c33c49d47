"""The single-user sign-in of ``kiln serve``: the ``local`` user and a one-time login link,
printed in a box (:func:`boxed`) so it stands out among the start-up lines."""

from __future__ import annotations

from app.config import ServiceSettings
from app.store import Store, StoreConflict

LOCAL_USER = "local"
LOGIN_TTL_SECONDS = 24 * 3600.0


def local_login_url(store: Store, settings: ServiceSettings) -> tuple[str, bool]:
    """A fresh login link for ``local`` (created if missing), and whether it was created.

    Blocking (the store): call it from a thread. The token works once, for a day.
    """
    user = store.user_by_name(LOCAL_USER)
    created = user is None
    if user is None:
        try:
            user = store.create_user(LOCAL_USER)
        except StoreConflict:
            # Another host of the deployment (one shared database) made it at the same moment.
            user, created = store.user_by_name(LOCAL_USER), False
            if user is None:
                raise
    token = store.create_token(user.id, "login", LOGIN_TTL_SECONDS)
    return f"http://{settings.public_host}:{settings.port}/login?token={token}", created


def boxed(url: str) -> str:
    """The sign-in link in a box of its own, with what to do with it (one text, many lines)."""
    lines = [
        "Open this link to sign in (it works once):",
        f"  {url}",
        "A new one at any time: kiln login-url",
    ]
    width = max(len(line) for line in lines)
    rule = "+" + "-" * (width + 2) + "+"
    body = [f"| {line.ljust(width)} |" for line in lines]
    return "\n".join([rule, *body, rule])
