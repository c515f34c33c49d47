"""Where kiln's Redis is and how it signs in: ``REDIS_URL``, and its password kept in a file.

Every Redis client kiln makes (API, workers, CLIs, the preview, the sandbox layer) is built from
the one URL this module reads, so a password reaches all of them by one rule:

- in ``REDIS_URL`` itself: ``redis://:password@host:6379/0``, ``redis://user:password@host/0``
  (an ACL user), ``rediss://...`` for TLS; characters such as ``@`` or ``/`` percent-encoded;
- or in the file ``KILN_REDIS_PASSWORD_FILE`` names (a compose or Kubernetes secret): its
  contents, less one trailing line break, are put into ``REDIS_URL`` as its password (a user
  name in the URL is kept). Giving both is refused: two passwords would leave one silently
  ignored. The file without ``REDIS_URL`` is refused too: kiln's embedded ``redis-server``
  (started by ``kiln serve`` when ``REDIS_URL`` is unset) listens on a private unix socket and
  takes no password.

The URL holding a password is never printed: messages, logs and ``kiln doctor`` show
:func:`redacted_url` (the password, also a ``?password=`` query, as ``***``).
"""

from __future__ import annotations

from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from sandbox.env_settings import EnvReader

PASSWORD_FILE = "KILN_REDIS_PASSWORD_FILE"
MASK = "***"


def redis_url_from_env(read: EnvReader) -> str | None:
    """``REDIS_URL`` (``None`` when unset) with the password of ``KILN_REDIS_PASSWORD_FILE``
    put in when that is set (the module docstring's rule); refused with ``read.error``."""
    raw = read.raw("REDIS_URL")
    url = None if raw is None else raw.strip()
    password_file = read.optional_path(PASSWORD_FILE)
    if password_file is None:
        return url
    if url is None:
        raise read.error(
            f"{PASSWORD_FILE}={str(password_file)!r} is set but REDIS_URL is not: the embedded "
            "Redis takes no password (set REDIS_URL to the Redis the password is for)"
        )
    if urlsplit(url).password is not None or "password" in dict(parse_qsl(urlsplit(url).query)):
        raise read.error(
            f"REDIS_URL={redacted_url(url)!r} holds a password and {PASSWORD_FILE} gives "
            "another: keep one of them"
        )
    return with_password(url, _read_password(read, password_file))


def _read_password(read: EnvReader, path: object) -> str:
    """The password kept in the file ``path`` (one trailing line break dropped)."""
    try:
        with open(str(path), encoding="utf-8") as file:
            password = file.read().removesuffix("\n").removesuffix("\r")
    except (OSError, UnicodeDecodeError) as exc:
        raise read.error(f"{PASSWORD_FILE}={str(path)!r} cannot be read: {exc}") from exc
    if password == "":
        raise read.error(f"{PASSWORD_FILE}={str(path)!r} is empty: no password in it")
    return password


def with_password(url: str, password: str) -> str:
    """``url`` signing in with ``password`` (percent-encoded; the user name, if any, kept)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    user = parts.netloc.rpartition("@")[0].partition(":")[0]
    netloc = f"{user}:{quote(password, safe='')}@{host}"
    return urlunsplit(parts._replace(netloc=netloc))


def redacted_url(url: str) -> str:
    """``url`` with its password (in the address or a ``password=`` query) shown as ``***``:
    what messages, logs and ``kiln doctor`` print of a Redis or a database URL."""
    parts = urlsplit(url)
    user, has_login, host = parts.netloc.rpartition("@")
    query = parse_qsl(parts.query, keep_blank_values=True)
    in_query = any(name == "password" for name, _ in query)
    if not (has_login and ":" in user) and not in_query:
        return url  # as given: urlunsplit would rewrite a unix:/// URL
    if has_login and ":" in user:
        parts = parts._replace(netloc=f"{user.partition(':')[0]}:{MASK}@{host}")
    if in_query:
        masked = [(name, MASK if name == "password" else value) for name, value in query]
        parts = parts._replace(query=urlencode(masked, safe="*"))
    return urlunsplit(parts)
