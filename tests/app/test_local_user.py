"""The ``local`` user of ``kiln serve`` and its one-time login links."""

from __future__ import annotations

from pathlib import Path

from app.cli.local_user import local_login_url
from app.config import ServiceSettings
from app.store import Store, User


def test_the_first_link_creates_local_and_later_ones_reuse_it(tmp_path: Path) -> None:
    settings = ServiceSettings(tmp_path, "x" * 20, public_host="kiln.test", port=9000)
    store = Store(tmp_path / "kiln.db", settings.secret_key)
    first, created = local_login_url(store, settings)
    second, created_again = local_login_url(store, settings)
    assert (created, created_again) == (True, False)
    assert first.startswith("http://kiln.test:9000/login?token=")
    tokens = [url.split("token=", 1)[1] for url in (first, second)]
    users = [store.consume_login_token(token) for token in tokens]
    assert [user.name if user else None for user in users] == ["local", "local"]
    assert store.consume_login_token(tokens[0]) is None  # one-time
    store.close()


class LateStore(Store):
    """A store on which another host makes ``local`` between this host's look and its insert
    (two API hosts of one deployment starting at once)."""

    def user_by_name(self, name: str) -> User | None:
        if not getattr(self, "raced", False):
            self.raced = True
            self.create_user(name)  # the other host's, committed first
            return None
        return super().user_by_name(name)


def test_a_local_user_made_by_another_host_at_once_is_taken(tmp_path: Path) -> None:
    settings = ServiceSettings(tmp_path, "x" * 20)
    store = LateStore(tmp_path / "kiln.db", settings.secret_key)
    url, created = local_login_url(store, settings)
    user = store.consume_login_token(url.split("token=", 1)[1])
    assert created is False
    assert user is not None
    assert user.name == "local"
    store.close()
