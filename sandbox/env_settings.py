"""The one reader of kiln's environment settings: typed values with ranges, refused in words.

Every ``KILN_*`` setting of the sandbox layer (:mod:`sandbox.settings`) and of the service
(``app.config``) is read through :class:`EnvReader`, so one rule decides what a value may be:

- unset or blank means the default (for :meth:`EnvReader.optional_file`, blank means "none");
- integers are whole numbers (``"2.0"`` is refused), numbers are finite (``inf`` and ``nan``
  are refused, rather than failing later with an ``OverflowError`` or meaning "no limit");
- both have a range, and the error says which: ``KILN_SANDBOX_PIDS='-5' must be an integer >= 1``;
- sizes are Docker's ``<number>[b|k|m|g]`` (``512m``, ``1g``); booleans are ``1/0``, ``true/false``,
  ``yes/no`` or ``on/off``; a named file must exist.

It lives in ``sandbox`` because ``sandbox`` may not import ``app`` while ``app`` may import
``sandbox`` (``from sandbox import EnvReader``). Each layer passes its own config error class
(:class:`~sandbox.errors.SandboxConfigError` here, ``app.errors.ConfigError`` in ``app``), so a
bad value lands in the tree of the layer that reads it, with that layer's stable code.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path

from sandbox.errors import SandboxConfigError

_SIZE = re.compile(r"(?P<amount>[0-9]+(?:\.[0-9]+)?)(?P<unit>[bkmg]?)")
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


class EnvReader:
    """Typed reads of an environment (``os.environ`` unless given); bad values raise
    ``error`` (a config error class) with a message naming the variable and the value."""

    def __init__(
        self, env: Mapping[str, str] | None = None, error: type[Exception] = SandboxConfigError
    ) -> None:
        """Read ``env``; refuse bad values with ``error``."""
        self.env: Mapping[str, str] = os.environ if env is None else env
        self.error = error

    def raw(self, name: str) -> str | None:
        """The value as written, or ``None`` when unset or blank."""
        value = self.env.get(name)
        return None if value is None or value.strip() == "" else value

    def text(self, name: str, default: str) -> str:
        """A string setting (surrounding blanks removed)."""
        raw = self.raw(name)
        return default if raw is None else raw.strip()

    def integer(
        self, name: str, default: int, *, low: int | None = None, high: int | None = None
    ) -> int:
        """A whole number in ``[low, high]`` (either bound may be open)."""
        raw = self.raw(name)
        if raw is None:
            return default
        try:
            value = int(raw.strip())
        except ValueError:
            raise self._refuse(name, raw, f"an integer{_bounds(low, high)}") from None
        if (low is not None and value < low) or (high is not None and value > high):
            raise self._refuse(name, raw, f"an integer{_bounds(low, high)}")
        return value

    def number(
        self,
        name: str,
        default: float,
        *,
        low: float | None = 0.0,
        high: float | None = None,
        low_open: bool = True,
    ) -> float:
        """A finite number in ``(low, high]`` (``[low, high]`` with ``low_open=False``);
        by default any positive number."""
        raw = self.raw(name)
        if raw is None:
            return default
        want = f"a finite number{_bounds(low, high, low_open)}"
        try:
            value = float(raw.strip())
        except ValueError:
            raise self._refuse(name, raw, want) from None
        below = low is not None and (value <= low if low_open else value < low)
        if not math.isfinite(value) or below or (high is not None and value > high):
            raise self._refuse(name, raw, want)
        return value

    def size(self, name: str, default: str, *, low: str = "1b") -> str:
        """A Docker size (``<number>[b|k|m|g]``) of at least ``low``, lower-cased: ``"1g"``."""
        raw = self.raw(name)
        if raw is None:
            return default
        value = raw.strip().lower()
        if size_bytes(value) < (size_bytes(low) or 1):
            raise self._refuse(name, raw, f"a size like 512m or 1g (b, k, m, g), at least {low}")
        return value

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        """One of ``choices`` (any case, blanks removed)."""
        raw = self.raw(name)
        if raw is None:
            return default
        word = raw.strip().lower()
        if word not in choices:
            raise self._refuse(name, raw, f"one of {', '.join(choices)}")
        return word

    def boolean(self, name: str, default: bool) -> bool:
        """``1/true/yes/on`` or ``0/false/no/off`` (any case)."""
        raw = self.raw(name)
        if raw is None:
            return default
        word = raw.strip().lower()
        if word in _TRUE or word in _FALSE:
            return word in _TRUE
        raise self._refuse(name, raw, "a boolean (1/0, true/false, yes/no, on/off)")

    def path(self, name: str, default: Path) -> Path:
        """A path (``~`` expanded); it need not exist yet."""
        raw = self.raw(name)
        return default if raw is None else Path(raw.strip()).expanduser()

    def optional_path(self, name: str) -> Path | None:
        """A path (``~`` expanded), or ``None`` when unset or blank."""
        raw = self.raw(name)
        return None if raw is None else Path(raw.strip()).expanduser()

    def optional_file(self, name: str, default: Path | None) -> Path | None:
        """A file that must exist; unset gives ``default``, an explicit empty value ``None``."""
        value = self.env.get(name)
        if value is None:
            return default
        if value.strip() == "":
            return None
        path = Path(value.strip()).expanduser()
        if not path.is_file():
            raise self._refuse(name, value, "a readable file (or empty for none)")
        return path

    def names(self, name: str, default: tuple[str, ...]) -> tuple[str, ...]:
        """A comma-separated list, blanks dropped; an explicit empty value is the empty list."""
        value = self.env.get(name)
        if value is None:
            return default
        return tuple(part.strip() for part in value.split(",") if part.strip())

    def _refuse(self, name: str, raw: str, want: str) -> Exception:
        return self.error(f"{name}={raw!r} must be {want}")


def _bounds(low: float | None, high: float | None, low_open: bool = False) -> str:
    """`` >= 1``, `` > 0``, `` between 1 and 65535``, `` > 0 and <= 1``, or nothing."""
    if low is not None and high is not None:
        if low_open:
            return f" > {_plain(low)} and <= {_plain(high)}"
        return f" between {_plain(low)} and {_plain(high)}"
    if low is not None:
        return f" {'>' if low_open else '>='} {_plain(low)}"
    if high is not None:
        return f" <= {_plain(high)}"
    return ""


def size_bytes(size: str) -> int:
    """The bytes of a Docker size (``"512m"``); 0 for anything that is not one."""
    found = _SIZE.fullmatch(size.strip().lower())
    return int(float(found["amount"]) * _UNITS[found["unit"]]) if found else 0


def _plain(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)
