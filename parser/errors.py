"""The parser's exceptions.

Most problems in a stream are *reported*, as ``error`` events, never raised: a model's mistake must
not stop the stream. Exceptions are for callers' mistakes and for the validators that other layers
reuse (the sandbox re-checks paths and package specs with the same functions).

``parser`` imports nothing from the rest of kiln, so these do not derive from ``app``'s
``KilnError``; app/errors.py draws them, once, in the service's tree. Each class carries the stable
``code`` of the ``error`` event a user sees.
"""

from __future__ import annotations

from typing import ClassVar


class ParseError(ValueError):
    """Base of the parser's exceptions."""

    code: ClassVar[str] = "parse_error"


class UnsafePathError(ParseError):
    """A file path that is empty, absolute, escapes the workspace or holds control characters."""

    code: ClassVar[str] = "invalid_file_path"


class ProtectedPathError(UnsafePathError):
    """A path inside a folder the model must not write: installed packages, kiln's own."""

    code: ClassVar[str] = "protected_path"


class InvalidPackageError(ParseError):
    """A package spec that is not ``name`` or ``name@version-range-or-tag`` in npm's grammar."""

    code: ClassVar[str] = "invalid_package"
