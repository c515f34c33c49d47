"""One ``kiln doctor`` check's result (shared by the doctor's modules)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckResult:
    """One check: passed or not, what was found, and what to do about a failure."""

    name: str
    ok: bool
    detail: str
    hint: str = ""
